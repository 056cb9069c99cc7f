package build

import (
	"encoding/json"
	"strings"
	"testing"
)

// checkScan holds for any input: scanning never panics, and for each wasm
// def found, setting its hash rewrites exactly that def's hash and leaves
// the file valid JSON that scans to the same defs with the new hash.
func checkScan(t *testing.T, data []byte) {
	defs, err := scanFile("f.json", data)
	if err != nil {
		return
	}
	const h = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	for i, d := range defs {
		if d.hashAt[0] >= 0 {
			var got string
			if err := json.Unmarshal(data[d.hashAt[0]:d.hashAt[1]], &got); err != nil || got != d.hash {
				t.Fatalf("def %d: span %v holds %q, not the hash %q (%v)", i, d.hashAt, data[d.hashAt[0]:d.hashAt[1]], d.hash, err)
			}
		}
		out := applyEdits(data, []edit{d.setHash(h)})
		if !json.Valid(out) {
			t.Fatalf("def %d: rewritten file is not JSON:\n%s", i, out)
		}
		again, err := scanFile("f.json", out)
		if err != nil || len(again) != len(defs) {
			t.Fatalf("def %d: rescan: %d defs, %v\n%s", i, len(again), err, out)
		}
		for j := range again {
			want := defs[j].hash
			if j == i {
				want = h
			}
			if again[j].hash != want || again[j].name != defs[j].name || again[j].source != defs[j].source || again[j].artifact != defs[j].artifact {
				t.Fatalf("def %d after setting def %d: %+v, want hash %q", j, i, again[j], want)
			}
		}
	}
}

var scanSeeds = []string{
	`{"$kind":"defmodule","name":"a/b@1","runtime":{"kind":"wasm","artifact":"a.wasm","hash":"sha256:00","source":"s"}}`,
	`[{"$kind":"defmodule","name":"a/b@1","runtime":{"artifact":"a.wasm","kind":"wasm"}},
	  {"runtime":{"kind":"wasm","hash" :  "x\u0041\"y" ,"artifact":"b\/c.wasm"},"$kind":"defmodule","name":"a/c@1"}]`,
	`[{"$kind":"defschema","name":"a/S@1","schema":{"runtime":{"kind":"wasm","artifact":"nope"}}},
	  {"$kind":"defmodule","name":"a/m@1","runtime":{"kind":"builtin","builtin":"x","identity":"1"}}]`,
	"[\n  {\"$kind\": \"defmodule\",\n   \"runtime\": {\"kind\": \"wasm\",\t\"artifact\": \"a.wasm\",\r\n \"hash\"\n:\n\"h\"},\n \"name\": \"n/m@1\"}\n]\n",
}

func TestScan(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
	defs, err := scanFile("f.json", []byte(scanSeeds[1]))
	if err != nil || len(defs) != 2 || defs[0].hashAt[0] != -1 || defs[1].hash != `xA"y` || defs[1].artifact != "b/c.wasm" {
		t.Fatalf("%+v %v", defs, err)
	}
	defs, err = scanFile("f.json", []byte(scanSeeds[2]))
	if err != nil || len(defs) != 0 {
		t.Fatalf("non-wasm defs found: %+v %v", defs, err)
	}
	for _, bad := range []struct{ text, msg string }{
		{`7`, "must hold a def object or an array"},
		{`[7]`, "element 0 is not a def object"},
		{`{"$kind":"defmodule","name":"a/b@1","runtime":{"kind":"wasm","artifact":"a.wasm"}} {}`, "data after the top-level value"},
		{`{"$kind":"defmodule","name":"a/b@1","name":"a/c@1"}`, `duplicate key "name"`},
		{`{"$kind":"defmodule","name":"a/b@1","runtime":{"kind":"wasm"}}`, `needs "artifact"`},
		{`{"$kind":"defmodule","name":"a/b@1","runtime":{"kind":"wasm","artifact":["x"]}}`, `runtime "artifact" must be a string`},
		{`[{"$kind":"defmodule"`, "not valid JSON"},
	} {
		if _, err := scanFile("f.json", []byte(bad.text)); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: err %v, want %q", bad.text, err, bad.msg)
		}
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScan(t, data) })
}

func TestAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"go1.26.8": true, "go1.24": true, "go1.24rc1": true, "go1.23.4": false, "go1.9": false,
		"devel go1.27-abcdef Tue": true, "devel go1.21-x": false, "go2.0": true, "weird": true,
	} {
		if got := atLeast(v, MinGo); got != want {
			t.Errorf("atLeast(%q, %s) = %v, want %v", v, MinGo, got, want)
		}
	}
}
