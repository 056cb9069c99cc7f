package schemas

import "encoding/json"

// Arm is one arm of a variant schema: values look like {"$tag": Tag, "$value": <Schema>}.
type Arm struct {
	Tag    string
	Schema string // def name of the arm's schema
}

// SchemaDef is a named schema as a manifest declares it. Exactly one of Schema
// and Variant is set.
type SchemaDef struct {
	Name    string
	Schema  json.RawMessage // a JSON Schema document; "$ref" may name another def ("com.acme/OrderId@1")
	Variant []Arm           // declared order
}

// DefError is one problem with one schema def; Pointer is a JSON pointer into the def.
type DefError struct {
	Name    string
	Pointer string
	Msg     string
}

func (e *DefError) Error() string { return e.Name + " " + e.Pointer + ": " + e.Msg }

// DefErrors lists every problem found while compiling a set of defs.
type DefErrors []*DefError

func (e DefErrors) Error() string {
	s := ""
	for i, d := range e {
		if i > 0 {
			s += "\n"
		}
		s += d.Error()
	}
	return s
}
