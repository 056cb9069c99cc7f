package routing_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

const src = `[
 {"$kind":"defschema","name":"t/Created@1","schema":{"type":"object","properties":{"note_id":{"type":"string"},"n":{"type":"integer"}},"required":["note_id"]}},
 {"$kind":"defschema","name":"t/Deleted@1","schema":{"type":"object","properties":{"note_id":{"type":"string"}},"required":["note_id"]}},
 {"$kind":"defschema","name":"t/NoteEvent@1","variant":{"Created":"t/Created@1","Deleted":"t/Deleted@1"}},
 {"$kind":"defschema","name":"t/S@1","schema":{"type":"object"}},
 {"$kind":"defschema","name":"t/Id@1","schema":{"type":"string","pattern":"^n[0-9]+$"}},
 {"$kind":"defmodule","name":"t/m@1","runtime":{"kind":"builtin","builtin":"x","identity":"x@1"}},
 {"$kind":"defworkflow","name":"t/byvariant@1","state":"t/S@1","event":"t/NoteEvent@1","key_schema":"t/Id@1","effects_emitted":[],"impl":{"module":"t/m@1","entrypoint":"s"}},
 {"$kind":"defworkflow","name":"t/byarm@1","state":"t/S@1","event":"t/NoteEvent@1","key_schema":"t/Id@1","effects_emitted":[],"impl":{"module":"t/m@1","entrypoint":"s"}},
 {"$kind":"defworkflow","name":"t/plain@1","state":"t/S@1","event":"t/Created@1","effects_emitted":[],"impl":{"module":"t/m@1","entrypoint":"s"}},
 {"$kind":"manifest","name":"t/r","routing":{"subscriptions":[
   {"event":"t/NoteEvent@1","workflow":"t/byvariant@1","key_field":"$value.note_id"},
   {"event":"t/Created@1","workflow":"t/byarm@1","key_field":"note_id"},
   {"event":"t/Created@1","workflow":"t/plain@1"}]}}
]`

func router(t *testing.T) (*routing.Router, *manifest.Manifest) {
	t.Helper()
	m, err := manifest.LoadBytes(t.TempDir()+"/m.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r, err := routing.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return r, m
}

func cb(t *testing.T, m *manifest.Manifest, schema, js string) []byte {
	t.Helper()
	b, err := m.Registry.FromJSON(schema, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoute(t *testing.T) {
	r, m := router(t)
	tests := []struct {
		name, schema, value string
		want                []string // workflow and key JSON
		wrapped             []bool
		err                 bool
	}{
		{"fan-out in manifest order, arm wrapped", "t/Created@1", `{"note_id":"n1","n":2}`,
			[]string{`t/byarm@1 "n1"`, `t/plain@1 null`}, []bool{true, false}, false},
		{"variant subscription with $value key", "t/NoteEvent@1", `{"$tag":"Deleted","$value":{"note_id":"n7"}}`,
			[]string{`t/byvariant@1 "n7"`}, []bool{false}, false},
		{"no subscription routes nowhere", "t/Deleted@1", `{"note_id":"n1"}`, nil, nil, false},
		{"key fails key_schema", "t/Created@1", `{"note_id":"x1"}`, nil, nil, true},
		{"key fails again from the cache", "t/Created@1", `{"note_id":"x1"}`, nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Route(tc.schema, cb(t, m, tc.schema, tc.value))
			if tc.err {
				if !errors.Is(err, routing.ErrKey) {
					t.Fatalf("err %v, want ErrKey", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d targets, want %d", len(got), len(tc.want))
			}
			for i, tg := range got {
				key := "null"
				if tg.Key != nil {
					js, _ := schemas.ToJSON(tg.Key)
					key = string(js)
				}
				if s := tg.Workflow + " " + key; s != tc.want[i] {
					t.Fatalf("target %d: %s, want %s", i, s, tc.want[i])
				}
				v, err := schemas.Decode(tg.Value)
				if err != nil {
					t.Fatal(err)
				}
				_, isWrapped := v.(map[string]any)["$tag"]
				if isWrapped != tc.wrapped[i] && tc.schema != "t/NoteEvent@1" {
					t.Fatalf("target %d wrapped=%v, want %v", i, isWrapped, tc.wrapped[i])
				}
				if err := m.Registry.Validate(tg.Schema, tg.Value); err != nil {
					t.Fatalf("delivered value does not validate as %s: %v", tg.Schema, err)
				}
			}
		})
	}
}

func TestWrapIsCanonical(t *testing.T) {
	inner := schemas.MustMarshal(map[string]any{"note_id": "n1"})
	w := routing.Wrap("Created", inner)
	want := schemas.MustMarshal(map[string]any{"$tag": "Created", "$value": map[string]any{"note_id": "n1"}})
	if string(w) != string(want) {
		t.Fatalf("Wrap = %x, want %x", w, want)
	}
	if err := schemas.CheckCanonical(w); err != nil {
		t.Fatal(err)
	}
	// Tags of every head length, values of every kind: the library's bytes.
	for _, n := range []int{0, 1, 23, 24, 255, 256, 70000} {
		tag := strings.Repeat("T", n)
		for _, v := range []any{uint64(7), "x", []any{}, map[string]any{"a": []byte{1}}, nil, strings.Repeat("v", n)} {
			want := schemas.MustMarshal(map[string]any{"$tag": tag, "$value": v})
			if got := routing.Wrap(tag, schemas.MustMarshal(v)); string(got) != string(want) {
				t.Fatalf("Wrap(%d-byte tag, %v) = %x, want %x", n, v, got, want)
			}
		}
	}
}

// TestUnwrap reads back what Wrap wrote, for tags of every head length,
// and refuses what Wrap does not write.
func TestUnwrap(t *testing.T) {
	for _, n := range []int{0, 1, 23, 24, 255, 256, 70000} {
		tag := strings.Repeat("T", n)
		for _, v := range []any{uint64(7), "x", map[string]any{"a": []byte{1}}, nil} {
			inner := schemas.MustMarshal(v)
			gotTag, gotInner, ok := routing.Unwrap(routing.Wrap(tag, inner))
			if !ok || gotTag != tag || string(gotInner) != string(inner) {
				t.Fatalf("Unwrap(Wrap(%d-byte tag, %v)) = %d-byte tag, %x, %v", n, v, len(gotTag), gotInner, ok)
			}
		}
	}
	wrapped := routing.Wrap("Created", schemas.MustMarshal(1))
	for name, b := range map[string][]byte{
		"empty":          nil,
		"a plain map":    schemas.MustMarshal(map[string]any{"a": 1}),
		"no value":       wrapped[:len(wrapped)-8],
		"a short tag":    wrapped[:7],
		"a tag not text": append([]byte("\xa2\x64$tag\x01"), wrapped[13:]...),
	} {
		if _, _, ok := routing.Unwrap(b); ok {
			t.Errorf("%s: Unwrap(%x) ok", name, b)
		}
	}
}
