package manifest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

// reformat writes v as JSON with keys in reverse order and odd whitespace.
func reformat(b *bytes.Buffer, v any, indent string) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		b.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ,\n")
			}
			kb, _ := json.Marshal(k)
			fmt.Fprintf(b, "%s\t%s :  ", indent, kb)
			reformat(b, t[k], indent+"\t")
		}
		b.WriteString("\n" + indent + "}")
	case []any:
		b.WriteString("[ ")
		for i, e := range t {
			if i > 0 {
				b.WriteString(",\r\n" + indent)
			}
			reformat(b, e, indent+"  ")
		}
		b.WriteString(" ]")
	default:
		eb, _ := json.Marshal(t)
		b.Write(eb)
	}
}

// rewriteDir copies a manifest dir, reformatting every file and merging all
// defs into one file (a different split of the same defs).
func rewriteDir(t *testing.T, src string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(src, "*.json"))
	var all []any
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if a, ok := v.([]any); ok {
			all = append(all, a...)
		} else {
			all = append(all, v)
		}
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	var b bytes.Buffer
	reformat(&b, all, "")
	dst := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, "all.json"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func mustLoad(t *testing.T, path string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatalf("load %s:\n%v", path, err)
	}
	return m
}

func TestHashIgnoresKeyOrderWhitespaceAndFileSplit(t *testing.T) {
	for _, ex := range []string{"counter", "orders", "notes", "reminders", "choreography"} {
		t.Run(ex, func(t *testing.T) {
			dir := filepath.Join(built.Dir(t), ex)
			arts := exampleArtifacts(t)
			a, err := manifest.LoadWith(dir, arts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := manifest.LoadWith(rewriteDir(t, dir), arts)
			if err != nil {
				t.Fatal(err)
			}
			if a.Hash != b.Hash {
				t.Fatalf("manifest hash changed: %v vs %v", a.Hash, b.Hash)
			}
			if !bytes.Equal(a.Source, b.Source) {
				t.Fatal("Source changed")
			}
			if len(a.Defs) != len(b.Defs) {
				t.Fatalf("defs %d vs %d", len(a.Defs), len(b.Defs))
			}
			for i := range a.Defs {
				if a.Defs[i] != b.Defs[i] {
					t.Fatalf("def %s: %v vs %v", a.Defs[i].Name, a.Defs[i], b.Defs[i])
				}
			}
		})
	}
}

// TestHashPinsWasmCode: a wasm module is pinned by its artifact: other bytes
// under the same def give another manifest hash, and so does another memory
// limit (which decides whether a guest's allocation faults).
func TestHashPinsWasmCode(t *testing.T) {
	hashOf := func(code string, extra string) schemas.Hash {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "mod.wasm"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		mod := fmt.Sprintf(`{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"wasm","artifact":"mod.wasm","hash":%q%s}}`,
			schemas.HashBytes([]byte(code)), extra)
		if err := os.WriteFile(filepath.Join(dir, "m.json"), []byte(world(map[string]string{"m": mod})), 0o644); err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, dir).Hash
	}
	a := hashOf("code one", "")
	if hashOf("code one", "") != a {
		t.Fatal("same artifact, different manifest hash")
	}
	if hashOf("code two", "") == a {
		t.Error("another artifact gave the same manifest hash")
	}
	if hashOf("code one", `,"max_memory_mib":16`) == a {
		t.Error("another memory limit gave the same manifest hash")
	}
}

func TestHashCoversDefsAndRouting(t *testing.T) {
	h0 := mustHash(t, world(nil))
	for name, text := range map[string]string{
		"schema changed":   world(map[string]string{"s.st": `{"$kind":"defschema","name":"com.t/St@1","schema":{"type":"object","required":["a"]}}`}),
		"builtin changed":  world(map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"builtin","builtin":"t/mod2","identity":"t/mod2@1"}}`}),
		"identity changed": world(map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"builtin","builtin":"t/mod","identity":"t/mod@2"}}`}),
		"retry changed":    world(map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":4,"initial_backoff_ms":10,"max_backoff_ms":100}}`}),
		"routing order": world(map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[
			{"event":"com.t/Other@1","workflow":"com.t/u@1"},
			{"event":"com.t/Ev@1","workflow":"com.t/w@1","key_field":"id"},
			{"event":"com.t/NV@1","workflow":"com.t/nv@1","key_field":"$value.id"}]}}`}),
		"name changed":     world(map[string]string{"manifest": strings.Replace(base["manifest"], "com.t/world", "com.t/world2", 1)}),
		"unused def added": world(nil, `{"$kind":"defschema","name":"com.t/Extra@1","schema":{}}`),
	} {
		if mustHash(t, text) == h0 {
			t.Errorf("%s: manifest hash did not change", name)
		}
	}
	// Integral numbers are integers: 10 and 10.0 and 1e1 are the same def.
	same := world(map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":3.0,"initial_backoff_ms":1e1,"max_backoff_ms":100}}`})
	if mustHash(t, same) != h0 {
		t.Error("3.0 / 1e1 hash differently from 3 / 10")
	}
}

func mustHash(t *testing.T, text string) schemas.Hash {
	t.Helper()
	m, err := loadString(t, text)
	if err != nil {
		t.Fatalf("load:\n%v", err)
	}
	return m.Hash
}

func TestFromSourceRoundTrip(t *testing.T) {
	m, err := loadString(t, world(nil))
	if err != nil {
		t.Fatal(err)
	}
	back, err := manifest.FromSource(m.Source, nil)
	if err != nil {
		t.Fatalf("FromSource:\n%v", err)
	}
	if back.Hash != m.Hash || back.Name != m.Name || !bytes.Equal(back.Source, m.Source) {
		t.Fatalf("round trip differs: %v vs %v", back.Hash, m.Hash)
	}
	for name, w := range m.Workflows {
		if back.Workflows[name].Hash != w.Hash {
			t.Errorf("workflow %s hash differs", name)
		}
	}
	if d := manifest.Diff(m, back); !d.Empty() || len(d.Added)+len(d.Removed)+len(d.Changed) != 0 {
		t.Fatalf("diff of round trip: %+v", d)
	}

	for name, src := range map[string][]byte{
		"not cbor":       []byte("{}"),
		"wrong shape":    schemas.MustMarshal(map[string]any{"defs": 1}),
		"non-canonical":  append(schemas.MustMarshal(map[string]any{}), 0),
		"bad def inside": schemas.MustMarshal(map[string]any{"version": uint64(1), "defs": []any{map[string]any{"$kind": "defschema"}}}),
	} {
		if _, err := manifest.FromSource(src, nil); err == nil {
			t.Errorf("%s: FromSource accepted it", name)
		} else {
			problemsOf(t, err)
		}
	}
}

func wasmWorld(artifact, hash string) string {
	return world(map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"wasm","artifact":"` + artifact + `","hash":"` + hash + `"}}`})
}

func TestWasmModules(t *testing.T) {
	dir := t.TempDir()
	code := []byte("\x00asm\x01\x00\x00\x00 pretend module")
	if err := os.MkdirAll(filepath.Join(dir, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "build", "order.wasm"), code, 0o644); err != nil {
		t.Fatal(err)
	}
	h := schemas.HashBytes(code)
	write := func(text string) string {
		p := filepath.Join(dir, "world.json")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	m := mustLoad(t, write(wasmWorld("build/order.wasm", h.String())))
	mod := m.Modules["com.t/mod@1"]
	if !bytes.Equal(mod.Runtime.Bytes, code) || mod.Runtime.ArtifactHash != h.String() {
		t.Fatal("artifact bytes not loaded")
	}

	t.Run("FromSource fetches by hash", func(t *testing.T) {
		back, err := manifest.FromSource(m.Source, func(got schemas.Hash) ([]byte, error) {
			if got != h {
				return nil, errors.New("unknown blob")
			}
			return code, nil
		})
		if err != nil || back.Hash != m.Hash || !bytes.Equal(back.Modules["com.t/mod@1"].Runtime.Bytes, code) {
			t.Fatalf("FromSource: %v", err)
		}
		_, err = manifest.FromSource(m.Source, func(schemas.Hash) ([]byte, error) { return []byte("other"), nil })
		ps := problemsOf(t, err)
		if len(ps) != 1 || !strings.Contains(ps[0].Msg, "but the def declares "+h.String()) {
			t.Fatalf("got %v", ps)
		}
	})

	t.Run("wasm hash changes the def hash", func(t *testing.T) {
		other := []byte("\x00asm\x01\x00\x00\x00 other module")
		if err := os.WriteFile(filepath.Join(dir, "build", "other.wasm"), other, 0o644); err != nil {
			t.Fatal(err)
		}
		m2 := mustLoad(t, write(wasmWorld("build/other.wasm", schemas.HashBytes(other).String())))
		if m2.Modules["com.t/mod@1"].Hash == mod.Hash || m2.Hash == m.Hash {
			t.Fatal("artifact hash not covered")
		}
		d := manifest.Diff(m, m2)
		if len(d.Changed) != 1 || d.Changed[0] != "com.t/mod@1" {
			t.Fatalf("diff %+v", d)
		}
	})

	// A missing artifact: where it was looked for, once, and the command
	// that builds it: aosd build on the manifest when the def names its
	// source, else the go build line a module needs (-buildmode=c-shared).
	t.Run("missing artifact", func(t *testing.T) {
		full := filepath.Join(dir, "build", "missing.wasm")
		for _, c := range []struct{ source, want string }{
			{"", "wasm artifact build/missing.wasm not found (looked for " + full + "); build it with: " +
				"GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o " + full + ` PACKAGE (or name PACKAGE in "source" and run: aosd build ` + filepath.Join(dir, "world.json") + ")"},
			{"../src/wf", "wasm artifact build/missing.wasm not found (looked for " + full + "); build it from its source ../src/wf with: aosd build " + filepath.Join(dir, "world.json")},
		} {
			text := wasmWorld("build/missing.wasm", h.String())
			if c.source != "" {
				text = strings.Replace(text, `"kind":"wasm",`, `"kind":"wasm","source":"`+c.source+`",`, 1)
			}
			_, err := manifest.Load(write(text))
			ps := problemsOf(t, err)
			if len(ps) != 1 || !strings.HasSuffix(ps[0].Pointer, "/runtime/artifact") || ps[0].Msg != c.want {
				t.Fatalf("source %q: got %v\nwant %s", c.source, ps, c.want)
			}
			inCommand := 0
			if c.source == "" {
				inCommand = 1 // go build -o FULL
			}
			if n := strings.Count(ps[0].String(), full); n != 1+inCommand {
				t.Fatalf("the location is given %d times (want once, and in the command to run): %s", n, ps[0])
			}
		}
	})

	t.Run("hash mismatch", func(t *testing.T) {
		wrong := schemas.HashBytes([]byte("something else"))
		_, err := manifest.Load(write(wasmWorld("build/order.wasm", wrong.String())))
		ps := problemsOf(t, err)
		if len(ps) != 1 || !strings.HasSuffix(ps[0].Pointer, "/runtime/hash") ||
			ps[0].Msg != "wasm artifact build/order.wasm has hash "+h.String()+" but the def declares "+wrong.String()+
				`; if this artifact is the one you mean, set "hash" to `+h.String()+"; else rebuild it" {
			t.Fatalf("got %v", ps)
		}
		text := strings.Replace(wasmWorld("build/order.wasm", wrong.String()), `"kind":"wasm",`, `"kind":"wasm","source":"src",`, 1)
		_, err = manifest.Load(write(text))
		ps = problemsOf(t, err)
		if len(ps) != 1 || !strings.HasSuffix(ps[0].Msg, "; rebuild it and pin its hash with: aosd build "+filepath.Join(dir, "world.json")) {
			t.Fatalf("with a source: got %v", ps)
		}
	})

	// LoadArtifacts reads no artifact from disk: the bytes come from the
	// function, its refusal is the problem, and a file beside the manifest
	// (or anywhere its path points) is never read.
	t.Run("LoadArtifacts", func(t *testing.T) {
		p := write(wasmWorld("build/order.wasm", h.String()))
		var asked []string
		m, err := manifest.LoadArtifacts(p, "DIR", func(path, source string, want schemas.Hash) ([]byte, string) {
			asked = append(asked, path+" "+want.String())
			return code, ""
		})
		if err != nil || !bytes.Equal(m.Modules["com.t/mod@1"].Runtime.Bytes, code) || len(asked) != 1 || asked[0] != "build/order.wasm "+h.String() {
			t.Fatalf("LoadArtifacts: %v, asked %v", err, asked)
		}
		_, err = manifest.LoadArtifacts(p, "DIR", func(string, string, schemas.Hash) ([]byte, string) { return nil, "not sent" })
		ps := problemsOf(t, err)
		if len(ps) != 1 || ps[0].Msg != "not sent" || !strings.HasSuffix(ps[0].Pointer, "/runtime/artifact") {
			t.Fatalf("a refused artifact: %v", ps)
		}
		_, err = manifest.LoadArtifacts(write(strings.Replace(wasmWorld("build/order.wasm", h.String()), `"kind":"wasm",`, `"kind":"wasm","source":"src",`, 1)), "DIR",
			func(string, string, schemas.Hash) ([]byte, string) { return []byte("other bytes"), "" })
		ps = problemsOf(t, err)
		if len(ps) != 1 || !strings.HasSuffix(ps[0].Msg, "rebuild it and pin its hash with: aosd build DIR") {
			t.Fatalf("other bytes: %v", ps)
		}
	})
}

func TestDiff(t *testing.T) {
	a, err := loadString(t, world(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadString(t, world(map[string]string{
		"s.open": "",
		"s.v":    `{"$kind":"defschema","name":"com.t/V@1","variant":{"A":"com.t/Ev@1","R":"sys/EffectReceiptEnvelope@1"}}`,
		"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[
			{"event":"com.t/Ev@1","workflow":"com.t/w@1","key_field":"id"},
			{"event":"com.t/Ev@1","workflow":"com.t/nv@1","key_field":"id"}]}}`,
	}, `{"$kind":"defschema","name":"com.t/New@1","schema":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := manifest.Diff(a, b)
	if fmt.Sprint(d.Added) != "[com.t/New@1]" || fmt.Sprint(d.Removed) != "[com.t/Open@1]" || fmt.Sprint(d.Changed) != "[com.t/V@1]" {
		t.Errorf("defs: added %v removed %v changed %v", d.Added, d.Removed, d.Changed)
	}
	if len(d.SubscriptionsAdded) != 1 || d.SubscriptionsAdded[0].Workflow != "com.t/nv@1" ||
		len(d.SubscriptionsRemoved) != 2 || d.SubscriptionsRemoved[0].Workflow != "com.t/u@1" {
		t.Errorf("subscriptions: added %v removed %v", d.SubscriptionsAdded, d.SubscriptionsRemoved)
	}
	if d.Empty() || d.NameChanged {
		t.Error("Empty/NameChanged wrong")
	}
	all := manifest.Diff(nil, a)
	if len(all.Added) != len(a.Defs) || len(all.SubscriptionsAdded) != len(a.Routing.Subscriptions) || len(all.Removed)+len(all.Changed) != 0 {
		t.Errorf("diff from nil: %+v", all)
	}
	if !sort.StringsAreSorted(all.Added) {
		t.Error("Added not sorted")
	}
}

func TestSysEffects(t *testing.T) {
	effs := manifest.SysEffects()
	var names []string
	for _, e := range effs {
		names = append(names, e.Name)
		if e.Hash.IsZero() || !manifest.IsSysEffect(e.Name) {
			t.Errorf("%s: no hash or not sys", e.Name)
		}
	}
	if fmt.Sprint(names) != "[sys/blob.get@1 sys/blob.put@1 sys/http.request@1 sys/http.request@2 sys/timer.set@1]" {
		t.Fatalf("names %v", names)
	}
	effs[0].Params = "changed"
	if manifest.SysEffects()[0].Params == "changed" {
		t.Fatal("SysEffects shares state")
	}
	reg := schemas.NewRegistry()
	for _, e := range manifest.SysEffects() {
		if !reg.Has(e.Params) || !reg.Has(e.Receipt) {
			t.Errorf("%s refers to unknown sys schemas", e.Name)
		}
	}
}
