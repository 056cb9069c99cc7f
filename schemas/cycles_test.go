package schemas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// TestDefineRefusesRefCycles: a cycle of references through keywords that
// apply to the same place in a value can validate nothing, so Define
// refuses it, naming the defs on it, however long it is and whichever
// in-place keyword closes it. Recursion through a keyword that descends
// into the value (a tree) is a schema like any other.
func TestDefineRefusesRefCycles(t *testing.T) {
	def := func(name, schema string) schemas.SchemaDef {
		return schemas.SchemaDef{Name: name, Schema: []byte(schema)}
	}
	refused := []struct {
		name string
		defs []schemas.SchemaDef
		want string // the defs the error names, in cycle order
	}{
		{"self", []schemas.SchemaDef{def("c.x/A@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 refers to itself"},
		{"two", []schemas.SchemaDef{def("c.x/A@1", `{"$ref":"c.x/B@1"}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"three", []schemas.SchemaDef{def("c.x/A@1", `{"$ref":"c.x/B@1"}`), def("c.x/B@1", `{"$ref":"c.x/C@1"}`), def("c.x/C@1", `{"$ref":"c.x/A@1"}`)},
			"c.x/A@1 -> c.x/B@1 -> c.x/C@1 -> c.x/A@1"},
		{"allOf", []schemas.SchemaDef{def("c.x/A@1", `{"type":"object","allOf":[{"$ref":"c.x/B@1"}]}`), def("c.x/B@1", `{"allOf":[{"minProperties":1},{"$ref":"c.x/A@1"}]}`)},
			"c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"anyOf", []schemas.SchemaDef{def("c.x/A@1", `{"anyOf":[{"type":"string"},{"$ref":"c.x/B@1"}]}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"oneOf", []schemas.SchemaDef{def("c.x/A@1", `{"oneOf":[{"$ref":"c.x/B@1"}]}`), def("c.x/B@1", `{"oneOf":[{"$ref":"c.x/A@1"}]}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"not", []schemas.SchemaDef{def("c.x/A@1", `{"not":{"$ref":"c.x/B@1"}}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"if-then", []schemas.SchemaDef{def("c.x/A@1", `{"if":{"type":"object"},"then":{"$ref":"c.x/B@1"}}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"dependentSchemas", []schemas.SchemaDef{def("c.x/A@1", `{"dependentSchemas":{"x":{"$ref":"c.x/B@1"}}}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		{"through a local ref", []schemas.SchemaDef{def("c.x/A@1", `{"$defs":{"d":{"$ref":"c.x/B@1"}},"$ref":"#/$defs/d"}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
		// C reaches the cycle without being on it: the cycle is named, on
		// its first def.
		{"reached", []schemas.SchemaDef{def("c.x/C@1", `{"$ref":"c.x/A@1"}`), def("c.x/A@1", `{"$ref":"c.x/B@1"}`), def("c.x/B@1", `{"$ref":"c.x/A@1"}`)}, "c.x/A@1 -> c.x/B@1 -> c.x/A@1"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r := schemas.NewRegistry()
			before := r.Names()
			err := r.Define(tc.defs)
			var de schemas.DefErrors
			if !errors.As(err, &de) {
				t.Fatalf("define: %v, want a cycle refused", err)
			}
			if len(de) != 1 || !strings.Contains(de[0].Msg, "$ref cycle: "+tc.want) {
				t.Fatalf("define: %v, want one error naming %q", err, tc.want)
			}
			if len(r.Names()) != len(before) {
				t.Fatalf("a refused batch defined names: %v", r.Names())
			}
		})
	}

	allowed := []struct {
		name  string
		defs  []schemas.SchemaDef
		value string
	}{
		{"a tree", []schemas.SchemaDef{def("c.x/Node@1", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"c.x/Node@1"}}},"additionalProperties":false}`)},
			`{"kids":[{"kids":[]},{}]}`},
		{"mutual through properties", []schemas.SchemaDef{
			def("c.x/Node@1", `{"type":"object","properties":{"b":{"$ref":"c.x/B@1"}}}`),
			def("c.x/B@1", `{"type":"object","properties":{"a":{"$ref":"c.x/Node@1"}}}`)}, `{"b":{"a":{"b":{}}}}`},
		{"a variant arm back to its variant", []schemas.SchemaDef{
			{Name: "c.x/Node@1", Variant: []schemas.Arm{{Tag: "Leaf", Schema: "c.x/Leaf@1"}, {Tag: "Wrap", Schema: "c.x/Node@1"}}},
			def("c.x/Leaf@1", `{"type":"integer"}`)}, `{"$tag":"Wrap","$value":{"$tag":"Leaf","$value":3}}`},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			r := schemas.NewRegistry()
			if err := r.Define(tc.defs); err != nil {
				t.Fatalf("define: %v", err)
			}
			if _, err := r.FromJSON("c.x/Node@1", []byte(tc.value)); err != nil {
				t.Fatalf("value %s: %v", tc.value, err)
			}
		})
	}
}
