package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/manifest"
)

// problemsOf returns the Problems in err, failing the test if err is anything else.
func problemsOf(t *testing.T, err error) manifest.Problems {
	t.Helper()
	if err == nil {
		t.Fatal("load succeeded, want problems")
	}
	var ps manifest.Problems
	if !errors.As(err, &ps) || len(ps) == 0 {
		t.Fatalf("error is %T (%v), want non-empty manifest.Problems", err, err)
	}
	return ps
}

func TestTenMistakesGiveTenProblems(t *testing.T) {
	_, err := manifest.Load("testdata/ten_mistakes")
	ps := problemsOf(t, err)
	type want struct{ file, def, ptr, msg string }
	wants := []want{
		{"a_schemas.json", "com.shop/Note@1", "/5/schema/minLength", "must be >= 0"},
		{"a_schemas.json", "sys/OrderId@1", "/6/name", "names under sys/ are built in and cannot be redefined"},
		{"b_defs.json", "com.shop/charge@1", "/1/retry/max_backoff_ms", "max_backoff_ms 100 is less than initial_backoff_ms 500"},
		{"b_defs.json", "com.shop/order.step@1", "/2/description", `unknown field "description"`},
		{"b_defs.json", "com.shop/order.step@1", "/2/effects_emitted/1", "effect com.shop/refund@1: no defeffect with this name"},
		{"b_defs.json", "com.shop/tally@1", "/3/effects_emitted", "must be an array of strings, found string"},
		{"b_defs.json", "com.shop/tally@1", "/3/state", `duplicate key "state"`},
		{"b_defs.json", "com.shop/audit@1", "/4/state", "state schema com.shop/AuditState@1: no defschema with this name"},
		{"c_manifest.json", "com.shop/world", "/routing/subscriptions/0", `missing "key_field": workflow com.shop/order.step@1 is keyed`},
		{"c_manifest.json", "com.shop/world", "/routing/subscriptions/1/event", "neither the workflow's event schema com.shop/OrderEvent@1 nor an arm of it"},
	}
	if len(ps) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(wants), ps)
	}
	for i, w := range wants {
		p := ps[i]
		if filepath.Base(p.File) != w.file || p.Def != w.def || p.Pointer != w.ptr || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("problem %d:\n got %s\nwant %s: %s: %s: ...%s...", i, p, w.file, w.def, w.ptr, w.msg)
		}
	}
	// Error() is one line per problem, each naming the file, def and pointer.
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(wants) {
		t.Fatalf("Error() has %d lines, want %d", len(lines), len(wants))
	}
	for i, l := range lines {
		w := wants[i]
		if !strings.Contains(l, w.file+": "+w.def+": "+w.ptr+": ") {
			t.Errorf("line %d = %q, want file: def: pointer: prefix", i, l)
		}
	}
}

// base is a small valid world; rule tests change one def at a time.
var base = map[string]string{
	"s.key":   `{"$kind":"defschema","name":"com.t/Key@1","schema":{"type":"string"}}`,
	"s.ev":    `{"$kind":"defschema","name":"com.t/Ev@1","schema":{"type":"object","properties":{"id":{"$ref":"com.t/Key@1"},"n":{"type":"integer"},"meta":{"type":"object","properties":{"tenant":{"type":"string"}}}}}}`,
	"s.other": `{"$kind":"defschema","name":"com.t/Other@1","schema":{"type":"object","properties":{"id":{"type":"string"},"x":{"type":"string"}}}}`,
	"s.open":  `{"$kind":"defschema","name":"com.t/Open@1","schema":{"type":"object"}}`,
	"s.st":    `{"$kind":"defschema","name":"com.t/St@1","schema":{"type":"object"}}`,
	"s.v":     `{"$kind":"defschema","name":"com.t/V@1","variant":{"A":"com.t/Ev@1","O":"com.t/Open@1","R":"sys/EffectReceiptEnvelope@1"}}`,
	"s.nv":    `{"$kind":"defschema","name":"com.t/NV@1","variant":{"A":"com.t/Ev@1","B":"com.t/Other@1"}}`,
	"m":       `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"builtin","builtin":"t/mod","identity":"t/mod@1"}}`,
	"e":       `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":3,"initial_backoff_ms":10,"max_backoff_ms":100}}`,
	"w.keyed": `{"$kind":"defworkflow","name":"com.t/w@1","state":"com.t/St@1","event":"com.t/V@1","context":"sys/WorkflowContext@1","key_schema":"com.t/Key@1","effects_emitted":["com.t/fx@1","sys/timer.set@1"],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`,
	"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`,
	"w.nv":    `{"$kind":"defworkflow","name":"com.t/nv@1","state":"com.t/St@1","event":"com.t/NV@1","key_schema":"com.t/Key@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`,
	"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[
		{"event":"com.t/Ev@1","workflow":"com.t/w@1","key_field":"id"},
		{"event":"com.t/Other@1","workflow":"com.t/u@1"},
		{"event":"com.t/NV@1","workflow":"com.t/nv@1","key_field":"$value.id"}]}}`,
}

// world renders base with the given defs replaced ("" deletes) plus extra
// defs, as one JSON array (keys sorted, so pointers are stable: see defIndex).
func world(change map[string]string, extra ...string) string {
	keys := make([]string, 0, len(base))
	for k := range base {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var defs []string
	for _, k := range keys {
		d := base[k]
		if c, ok := change[k]; ok {
			d = c
		}
		if d != "" {
			defs = append(defs, d)
		}
	}
	defs = append(defs, extra...)
	return "[\n" + strings.Join(defs, ",\n") + "\n]"
}

func loadString(t *testing.T, text string) (*manifest.Manifest, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "world.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return manifest.Load(path)
}

func TestBaseWorldLoads(t *testing.T) {
	m, err := loadString(t, world(nil))
	if err != nil {
		t.Fatalf("base world:\n%v", err)
	}
	if !m.Workflows["com.t/w@1"].Keyed() || m.Workflows["com.t/u@1"].Keyed() {
		t.Fatal("Keyed() wrong")
	}
	if m.Effects[manifest.SysTimerSet] == nil || m.Effects["com.t/fx@1"].Retry.MaxAttempts != 3 {
		t.Fatal("effects missing")
	}
	if got := m.Registry.Arms("com.t/V@1"); len(got) != 3 || got[0].Tag != "A" {
		t.Fatalf("arms = %v", got)
	}
}

func TestRules(t *testing.T) {
	type tc struct {
		name   string
		text   string // whole file; empty means world(change, extra...)
		change map[string]string
		extra  []string
		def    string // expected def name of the single problem
		ptr    string // suffix of the expected pointer
		msg    string // substring of the expected message
	}
	cases := []tc{
		{name: "invalid JSON", text: `[{"$kind": "defschema",]`, ptr: "", msg: "invalid JSON at line 1, column 24"},
		{name: "trailing data", text: world(nil) + ` {}`, msg: "unexpected data after the top-level value"},
		{name: "not an object or array", text: `"hello"`, msg: "must hold a def object or an array of defs, found string"},
		{name: "def not an object", extra: []string{`42`}, msg: "a def must be an object, found number 42"},
		{name: "invalid UTF-8", text: "[\xff]", msg: "not valid UTF-8"},
		{name: "duplicate key", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","name":"com.t/mod@1","runtime":{"kind":"builtin","builtin":"t/mod","identity":"t/mod@1"}}`},
			def: "com.t/mod@1", ptr: "/name", msg: `duplicate key "name"`},
		{name: "missing kind", extra: []string{`{"name":"com.t/x@1"}`}, def: "com.t/x@1", msg: `missing "$kind"`},
		{name: "unknown kind", extra: []string{`{"$kind":"defthing","name":"com.t/x@1"}`}, def: "com.t/x@1", ptr: "/$kind", msg: `unknown "$kind" "defthing"`},
		{name: "unknown field", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","timeout":5}`},
			def: "com.t/fx@1", ptr: "/timeout", msg: `unknown field "timeout"`},
		{name: "unknown nested field", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"builtin","builtin":"t/mod","identity":"1","entry":"x"}}`},
			def: "com.t/mod@1", ptr: "/runtime/entry", msg: `unknown field "entry"`},
		{name: "wrong type", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":7,"event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/u@1", ptr: "/state", msg: `"state" must be a string, found number 7`},
		{name: "missing field", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/u@1", ptr: "", msg: `missing required field "effects_emitted"`},
		{name: "bad name", extra: []string{`{"$kind":"defschema","name":"Bad Name","schema":{}}`}, def: "Bad Name", ptr: "/name", msg: "not of the form namespace/name@N"},
		{name: "sys redefinition", extra: []string{`{"$kind":"defeffect","name":"sys/timer.set@1","params":"com.t/Other@1","receipt":"com.t/Other@1"}`},
			def: "sys/timer.set@1", ptr: "/name", msg: "names under sys/ are built in and cannot be redefined"},
		{name: "duplicate def name", extra: []string{`{"$kind":"defmodule","name":"com.t/Key@1","runtime":{"kind":"builtin","builtin":"x","identity":"x@1"}}`},
			def: "com.t/Key@1", ptr: "/name", msg: "duplicate def name: already declared as a defschema"},
		{name: "no manifest", change: map[string]string{"manifest": ""}, msg: `no "$kind": "manifest" def`},
		{name: "two manifests", extra: []string{`{"$kind":"manifest","name":"com.t/again"}`}, def: "com.t/again", msg: `more than one "manifest" def`},
		{name: "unknown schema", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/Nope@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/u@1", ptr: "/state", msg: "state schema com.t/Nope@1: no defschema with this name"},
		{name: "schema ref names a module", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/mod@1","receipt":"com.t/Other@1"}`},
			def: "com.t/fx@1", ptr: "/params", msg: "params schema com.t/mod@1: is a defmodule, not a defschema"},
		{name: "unknown sys schema", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"sys/Nope@1","receipt":"com.t/Other@1"}`},
			def: "com.t/fx@1", ptr: "/params", msg: "no such built-in defschema"},
		{name: "unknown variant arm", change: map[string]string{"s.nv": `{"$kind":"defschema","name":"com.t/NV@1","variant":{"A":"com.t/Ev@1","B":"com.t/Gone@1"}}`},
			def: "com.t/NV@1", ptr: "/variant/B", msg: "arm B: schema com.t/Gone@1: no defschema"},
		{name: "schema and variant", change: map[string]string{"s.open": `{"$kind":"defschema","name":"com.t/Open@1","schema":{},"variant":{"A":"com.t/Ev@1"}}`},
			def: "com.t/Open@1", msg: `exactly one of "schema" and "variant"`},
		{name: "schema compile error", change: map[string]string{"s.open": `{"$kind":"defschema","name":"com.t/Open@1","schema":{"type":"object","properties":{"a":{"$ref":"com.t/Missing@1"}}}}`},
			def: "com.t/Open@1", ptr: "/schema/properties/a/$ref", msg: `unknown schema "com.t/Missing@1"`},
		{name: "schema ref cycle", change: map[string]string{"s.open": `{"$kind":"defschema","name":"com.t/Open@1","schema":{"anyOf":[{"type":"string"},{"$ref":"com.t/Loop@1"}]}}`},
			extra: []string{`{"$kind":"defschema","name":"com.t/Loop@1","schema":{"allOf":[{"$ref":"com.t/Open@1"}]}}`},
			def:   "com.t/Loop@1", ptr: "/schema", msg: "$ref cycle: com.t/Loop@1 -> com.t/Open@1 -> com.t/Loop@1"},
		{name: "unknown module", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/gone@1","entrypoint":"step"}}`},
			def: "com.t/u@1", ptr: "/impl/module", msg: "module com.t/gone@1: no defmodule"},
		{name: "schema not an object", change: map[string]string{"s.open": `{"$kind":"defschema","name":"com.t/Open@1","schema":"object"}`},
			def: "com.t/Open@1", ptr: "/schema", msg: "must be a JSON Schema object"},
		{name: "unknown effect", change: map[string]string{"e": ""}, def: "com.t/w@1", ptr: "/effects_emitted/0", msg: "effect com.t/fx@1: no defeffect with this name"},
		{name: "effect listed twice", change: map[string]string{"w.keyed": `{"$kind":"defworkflow","name":"com.t/w@1","state":"com.t/St@1","event":"com.t/V@1","key_schema":"com.t/Key@1","effects_emitted":["sys/timer.set@1","sys/timer.set@1"],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/w@1", ptr: "/effects_emitted/1", msg: "listed twice"},
		{name: "migrate from an unknown schema", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"},"migrate":{"entrypoint":"migrate","from":["com.t/Gone@1"]}}`},
			def: "com.t/u@1", ptr: "/migrate/from/0", msg: "migration source schema com.t/Gone@1"},
		{name: "migrate from its own state", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"},"migrate":{"entrypoint":"migrate","from":["com.t/St@1"]}}`},
			def: "com.t/u@1", ptr: "/migrate/from/0", msg: "is the workflow's state schema"},
		{name: "migrate from nothing", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"},"migrate":{"entrypoint":"migrate","from":[]}}`},
			def: "com.t/u@1", ptr: "/migrate/from", msg: "at least one"},
		{name: "migrate with no entrypoint", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"},"migrate":{"from":["com.t/Other@1"]}}`},
			def: "com.t/u@1", ptr: "/migrate", msg: `missing required field "entrypoint"`},
		{name: "migrate with an unknown field", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"},"migrate":{"entrypoint":"migrate","from":["com.t/Other@1"],"to":"x"}}`},
			def: "com.t/u@1", ptr: "/migrate/to", msg: "unknown field"},
		{name: "migrate from a schema twice", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"},"migrate":{"entrypoint":"migrate","from":["com.t/Other@1","com.t/Other@1"]}}`},
			def: "com.t/u@1", ptr: "/migrate/from/1", msg: "listed twice"},
		{name: "unknown sys effect", change: map[string]string{"w.keyed": `{"$kind":"defworkflow","name":"com.t/w@1","state":"com.t/St@1","event":"com.t/V@1","key_schema":"com.t/Key@1","effects_emitted":["sys/teleport@1"],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/w@1", ptr: "/effects_emitted/0", msg: "no such built-in defeffect"},
		{name: "bad context", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","context":"com.t/St@1","effects_emitted":[],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/u@1", ptr: "/context", msg: "the only workflow context is sys/WorkflowContext@1"},
		{name: "effects without receipts", change: map[string]string{"w.plain": `{"$kind":"defworkflow","name":"com.t/u@1","state":"com.t/St@1","event":"com.t/Other@1","effects_emitted":["sys/timer.set@1"],"impl":{"module":"com.t/mod@1","entrypoint":"step"}}`},
			def: "com.t/u@1", ptr: "/event", msg: "cannot carry their receipts"},
		{name: "key_field missing", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Ev@1","workflow":"com.t/w@1"}]}}`},
			def: "com.t/world", ptr: "/routing/subscriptions/0", msg: `missing "key_field"`},
		{name: "key_field on unkeyed", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Other@1","workflow":"com.t/u@1","key_field":"x"}]}}`},
			def: "com.t/world", ptr: "/routing/subscriptions/0/key_field", msg: "has no key_schema"},
		{name: "event not deliverable", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Ev@1","workflow":"com.t/u@1"}]}}`},
			def: "com.t/world", ptr: "/routing/subscriptions/0/event", msg: "neither the workflow's event schema com.t/Other@1 nor an arm of it"},
		{name: "unknown workflow", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Ev@1","workflow":"com.t/gone@1","key_field":"id"}]}}`},
			def: "com.t/world", ptr: "/routing/subscriptions/0/workflow", msg: "workflow com.t/gone@1: no defworkflow"},
		{name: "unknown event", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Gone@1","workflow":"com.t/u@1"}]}}`},
			def: "com.t/world", ptr: "/routing/subscriptions/0/event", msg: "event schema com.t/Gone@1: no defschema"},
		{name: "duplicate subscription", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Other@1","workflow":"com.t/u@1"},{"event":"com.t/Other@1","workflow":"com.t/u@1"}]}}`},
			def: "com.t/world", ptr: "/routing/subscriptions/1", msg: "duplicate subscription"},
		{name: "key_field syntax", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Ev@1","workflow":"com.t/w@1","key_field":"id..x"}]}}`},
			def: "com.t/world", ptr: "/key_field", msg: "not a dotted path"},
		{name: "key_field not in event", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Ev@1","workflow":"com.t/w@1","key_field":"order_id"}]}}`},
			def: "com.t/world", ptr: "/key_field", msg: `no property "order_id" (declared: id, meta, n)`},
		{name: "nested key_field not in event", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/Ev@1","workflow":"com.t/w@1","key_field":"meta.org"}]}}`},
			def: "com.t/world", ptr: "/key_field", msg: `no property "org" (declared: tenant)`},
		{name: "variant key_field not in every arm", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/NV@1","workflow":"com.t/nv@1","key_field":"$value.n"}]}}`},
			def: "com.t/world", ptr: "/key_field", msg: `arm B (com.t/Other@1): no property "n"`},
		{name: "variant key_field without $value", change: map[string]string{"manifest": `{"$kind":"manifest","name":"com.t/world","routing":{"subscriptions":[{"event":"com.t/NV@1","workflow":"com.t/nv@1","key_field":"id"}]}}`},
			def: "com.t/world", ptr: "/key_field", msg: `try "$value.id"`},
		{name: "bad runtime kind", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"jvm"}}`},
			def: "com.t/mod@1", ptr: "/runtime/kind", msg: `runtime kind "jvm" is not "builtin" or "wasm"`},
		{name: "builtin without name", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"builtin","identity":"1"}}`},
			def: "com.t/mod@1", ptr: "/runtime", msg: `missing required field "builtin"`},
		{name: "builtin with artifact", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"builtin","builtin":"x","identity":"1","artifact":"a.wasm"}}`},
			def: "com.t/mod@1", ptr: "/runtime/artifact", msg: "only for wasm modules"},
		{name: "wasm bad hash syntax", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"wasm","artifact":"a.wasm","hash":"md5:1234"}}`},
			def: "com.t/mod@1", ptr: "/runtime/hash", msg: "is not sha256:<64 lower-case hex digits>"},
		{name: "wasm absolute artifact", change: map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"wasm","artifact":"/etc/a.wasm","hash":"sha256:` + strings.Repeat("0", 64) + `"}}`},
			def: "com.t/mod@1", ptr: "/runtime/artifact", msg: "must be relative to the manifest file"},
		{name: "retry zero attempts", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":0,"initial_backoff_ms":10,"max_backoff_ms":100}}`},
			def: "com.t/fx@1", ptr: "/retry/max_attempts", msg: "must be between 1 and 100"},
		{name: "retry spins", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":4,"initial_backoff_ms":0,"max_backoff_ms":100}}`},
			def: "com.t/fx@1", ptr: "/retry/initial_backoff_ms", msg: "must be positive when max_attempts > 1"},
		{name: "retry fractional", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":2.5,"initial_backoff_ms":10,"max_backoff_ms":100}}`},
			def: "com.t/fx@1", ptr: "/retry/max_attempts", msg: "must be an integer, found 2.5"},
		{name: "retry backoff inverted", change: map[string]string{"e": `{"$kind":"defeffect","name":"com.t/fx@1","params":"com.t/Other@1","receipt":"com.t/Other@1","retry":{"max_attempts":4,"initial_backoff_ms":1000,"max_backoff_ms":100}}`},
			def: "com.t/fx@1", ptr: "/retry/max_backoff_ms", msg: "less than initial_backoff_ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := c.text
			if text == "" {
				text = world(c.change, c.extra...)
			}
			_, err := loadString(t, text)
			ps := problemsOf(t, err)
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ps), ps)
			}
			p := ps[0]
			if filepath.Base(p.File) != "world.json" || (c.def != "" && p.Def != c.def) ||
				!strings.HasSuffix(p.Pointer, c.ptr) || !strings.Contains(p.Msg, c.msg) {
				t.Fatalf("got  %s\nwant def %q, pointer ...%q, message ...%q...", p, c.def, c.ptr, c.msg)
			}
		})
	}
}

func TestLoadPathProblems(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, path, msg string }{
		{"missing path", filepath.Join(dir, "nope"), "cannot read manifest"},
		{"empty directory", dir, "no *.json files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := manifest.Load(c.path)
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].File != c.path || !strings.Contains(ps[0].Msg, c.msg) {
				t.Fatalf("got %v", ps)
			}
		})
	}
}
