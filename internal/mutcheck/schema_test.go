package main

import (
	"testing"
)

// TestSchemaText: only a change of an if's condition (its init, and any
// lines after it, the same) goes into a schema, and the schema's condition
// is the mutated one when its switch is on and the original when off.
func TestSchemaText(t *testing.T) {
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"cond", "if len(x) > n {", "if false {",
			`if (mutcheckOn("m") && (false)) || (!mutcheckOn("m") && (len(x) > n)) {`},
		{"init", "if r, over := f(); over {", "if r, over := f(); over && false {",
			`if r, over := f(); (mutcheckOn("m") && (over && false)) || (!mutcheckOn("m") && (over)) {`},
		{"else-if and lines after", "\t} else if a {\n\t\treturn x", "\t} else if b {\n\t\treturn x",
			"\t} else if (mutcheckOn(\"m\") && (b)) || (!mutcheckOn(\"m\") && (a)) {\n\t\treturn x"},
		{"a line before", "r := f()\n\tif !r {", "r := f()\n\tif !r && false {",
			"r := f()\n\tif (mutcheckOn(\"m\") && (!r && false)) || (!mutcheckOn(\"m\") && (!r)) {"},
		{"two lines changed", "if a {\n\tif b {", "if c {\n\tif d {", ""},
		{"init changed", "if err := f(); err != nil {", "if err := error(nil); err != nil {", ""},
		{"lines after changed", "if a {\n\treturn 1", "if a {\n\treturn 2", ""},
		{"not an if", "case a:", "case false && a:", ""},
		{"statement before the if", "x++; if a {", "x++; if b {", ""},
		{"no brace", "if a", "if b", ""},
		{"a test file", "if a {", "if b {", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mutation{name: "m", file: "kernel/x.go", from: c.from, to: c.to}
			if c.name == "a test file" {
				m.file = "kernel/x_test.go"
			}
			got, ok := schemaText(m)
			if ok != (c.want != "") || got != c.want {
				t.Fatalf("schemaText(%q -> %q) = %q, %v; want %q", c.from, c.to, got, ok, c.want)
			}
		})
	}
}
