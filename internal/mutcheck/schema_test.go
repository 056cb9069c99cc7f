package main

import (
	"slices"
	"strings"
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

// TestSchemaEditStatements: a mutation of whole statements (its lines
// taken whole) goes into a schema as an if on the switch with the mutated
// lines, else the original ones, unless either side declares a name or a
// label, or holds a goto or fallthrough, at its top level (inside a block
// of its own they would mean something else), or is not statements at all.
func TestSchemaEditStatements(t *testing.T) {
	src := "package k\n\nfunc f() {\n\tx := 1\n\tg(x)\n\th()\n}\n"
	for _, c := range []struct {
		name, src, from, to, want string
	}{
		{"mid-line call", src, "g(x)", "_ = x",
			"\tif mutcheckOn(\"m\") {\n\t_ = x\n\t} else {\n\tg(x)\n\t}"},
		{"two lines", src, "\tg(x)\n\th()", "\th()",
			"\tif mutcheckOn(\"m\") {\n\th()\n\t} else {\n\tg(x)\n\th()\n\t}"},
		{"a line dropped, its newline with it", src, "\tg(x)\n", "",
			"\tif mutcheckOn(\"m\") {\n\t} else {\n\tg(x)\n\t}\n"},
		{"init changed, the if whole", "package k\n\nfunc f() {\n\tif err := g(); err != nil {\n\t\treturn\n\t}\n}\n",
			"if err := g(); err != nil {\n\t\treturn\n\t}", "if err := error(nil); err != nil {\n\t\treturn\n\t}",
			"\tif mutcheckOn(\"m\") {\n\tif err := error(nil); err != nil {\n\t\treturn\n\t}\n\t} else {\n\tif err := g(); err != nil {\n\t\treturn\n\t}\n\t}"},
		{"declares", src, "x := 1", "x := 2", ""},
		{"declares after", src, "\tg(x)\n", "\tg(x)\n\ty := 2\n\t_ = y\n", ""},
		{"var", src, "\tg(x)\n", "\tvar y int\n\tg(y)\n", ""},
		{"label", src, "\th()\n", "L:\n\th()\n", ""},
		{"goto", src, "\th()\n", "\tgoto L\n", ""},
		{"fallthrough", "package k\n\nfunc f(a int) {\n\tswitch a {\n\tcase 1:\n\t\tfallthrough\n\tdefault:\n\t}\n}\n",
			"fallthrough", "h()", ""},
		{"half an if: the if whole", "package k\n\nfunc f() {\n\tif err := g(); err != nil {\n\t\treturn\n\t}\n}\n",
			"if err := g(); err != nil {", "if err := error(nil); err != nil {",
			"\tif mutcheckOn(\"m\") {\n\tif err := error(nil); err != nil {\n\t\treturn\n\t}\n\t} else {\n\tif err := g(); err != nil {\n\t\treturn\n\t}\n\t}"},
		{"a case clause: the switch whole", "package k\n\nfunc f(a int) {\n\tswitch {\n\tcase a > 1:\n\t\th()\n\t}\n}\n",
			"case a > 1:", "case false:",
			"\tif mutcheckOn(\"m\") {\n\tswitch {\n\tcase false:\n\t\th()\n\t}\n\t} else {\n\tswitch {\n\tcase a > 1:\n\t\th()\n\t}\n\t}"},
		{"innermost: the if in the case", "package k\n\nfunc f(a int) {\n\tswitch {\n\tcase a > 1:\n\t\tif b := g(); b {\n\t\t\th()\n\t\t}\n\t}\n}\n",
			"if b := g(); b {", "if b := true; b {",
			"\t\tif mutcheckOn(\"m\") {\n\t\tif b := true; b {\n\t\t\th()\n\t\t}\n\t\t} else {\n\t\tif b := g(); b {\n\t\t\th()\n\t\t}\n\t\t}"},
		{"part of a declaration", "package k\n\nfunc f() {\n\tid := T{A: 1,\n\t\tB: 2}\n\tg(id)\n}\n",
			"id := T{A: 1,", "id := T{", ""},
		{"a field", "package k\n\nvar v = T{\n\tA: 1,\n}\n", "A: 1,", "", ""},
		{"closes a function", src, "\th()\n}\n", "}\nfunc g() {\n\th()\n}\n", ""},
		{"nothing left", src, "\th()\n", "\t// gone\n",
			"\tif mutcheckOn(\"m\") {\n\t// gone\n\t} else {\n\th()\n\t}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mutation{name: "m", file: "k/x.go", from: c.from, to: c.to}
			at, end, got, ok := schemaEdit(m, []byte(c.src))
			if ok != (c.want != "") || got != c.want {
				t.Fatalf("schemaEdit(%q -> %q) = %q, %v; want %q", c.from, c.to, got, ok, c.want)
			}
			if !ok {
				return
			}
			// The edit covers whole lines, from among them.
			i := strings.Index(c.src, c.from)
			if at > i || end < i+len(c.from) || (at > 0 && c.src[at-1] != '\n') || (end < len(c.src) && c.src[end] != '\n' && c.src[end-1] != '\n') {
				t.Fatalf("edit [%d, %d) of %q is not the whole lines of %q", at, end, c.src, c.from)
			}
		})
	}
}

// TestSchemaBlame: a failed schema build sheds the members whose lines
// the compiler names, and only when every error names one.
func TestSchemaBlame(t *testing.T) {
	s := &schema{at: map[string]span{
		"a": {"/t/1-x.go", 10, 14},
		"b": {"/t/1-x.go", 20, 20},
		"c": {"/t/2-y.go", 10, 12},
	}}
	for _, c := range []struct {
		name, out string
		want      []string
	}{
		{"one", "# p\n/t/1-x.go:12:3: undefined: z\n", []string{"a"}},
		{"two", "# p\n/t/1-x.go:20:1: x declared and not used\n/t/2-y.go:10:2: missing return\n", []string{"b", "c"}},
		{"edges", "/t/1-x.go:10:1: e\n/t/1-x.go:14:1: e\n", []string{"a"}},
		{"outside any", "/t/1-x.go:12:3: e\n/t/1-x.go:15:1: e\n", nil},
		{"another file", "/t/3-z.go:11:1: e\n", nil},
		{"no line", "go: build failed\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := s.blame(c.out)
			var got []string
			for n := range bad {
				got = append(got, n)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) || (bad == nil) != (c.want == nil) {
				t.Fatalf("blame(%q) = %v, want %v", c.out, got, c.want)
			}
		})
	}
}
