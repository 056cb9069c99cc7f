package schemas

import (
	"maps"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// A schema may refer to itself, or to a def that refers back to it, through
// a keyword that descends into the value ("properties", "items", ...): a
// tree of nodes is such a schema, and validating a value ends where the
// value ends. A cycle of references through keywords that apply to the
// same place in the value ("$ref", "allOf", "anyOf", "oneOf", "not",
// "if"/"then"/"else", "dependentSchemas") never ends: no value of such a
// schema can be validated, and the validator finds the loop only when a
// value arrives. The compiler catches a def that refers to itself
// directly; refCycle finds every other such cycle at definition time.

// inPlace calls f with each subschema s applies to the same place in the
// value as s itself.
func inPlace(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	for _, c := range []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.DynamicRef, s.Not, s.If, s.Then, s.Else} {
		if c != nil {
			f(c)
		}
	}
	for _, cs := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range cs {
			f(c)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		f(s.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if c, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			f(c)
		}
	}
}

// refCycle returns the locations of a cycle of in-place references
// reachable from root (the first location repeated at the end), or nil.
// Locations are the compiler's, with def names for their URLs.
func refCycle(root *jsonschema.Schema) []string {
	const (
		open = 1 // on the current path
		done = 2 // explored, no cycle through it
	)
	color := map[*jsonschema.Schema]int{}
	var path []*jsonschema.Schema
	var cycle []string
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if cycle != nil {
			return
		}
		switch color[s] {
		case open:
			i := len(path) - 1
			for path[i] != s {
				i--
			}
			for _, n := range path[i:] {
				cycle = append(cycle, strings.TrimPrefix(n.Location, schemaURLPrefix))
			}
			cycle = append(cycle, cycle[0])
			return
		case done:
			return
		}
		color[s] = open
		path = append(path, s)
		inPlace(s, visit)
		path = path[:len(path)-1]
		color[s] = done
	}
	visit(root)
	return cycle
}

// cycleDefs names the defs a cycle's locations belong to, in the cycle's
// order, each once.
func cycleDefs(cycle []string) []string {
	var out []string
	for _, loc := range cycle {
		name, _, _ := strings.Cut(loc, "#")
		if len(out) == 0 || out[len(out)-1] != name {
			out = append(out, name)
		}
	}
	if len(out) > 1 && out[0] == out[len(out)-1] {
		out = out[:len(out)-1]
	}
	return out
}

// refCycles reports each cycle of in-place references reachable from the
// defs compiled in a batch once, on the first def of the batch (in order)
// that is on it.
func refCycles(order []*pending, out map[string]*compiled, fail func(*pending, string, string, string, ...any)) {
	reported := map[string]bool{}
	for _, p := range order {
		c := out[p.def.Name]
		if c == nil {
			continue
		}
		cycle := refCycle(c.schema)
		if cycle == nil {
			continue
		}
		defs := cycleDefs(cycle)
		key := strings.Join(slices.Sorted(slices.Values(defs)), " ")
		if reported[key] {
			continue
		}
		reported[key] = true
		on := p
		for _, q := range order {
			if slices.Contains(defs, q.def.Name) {
				on = q
				break
			}
		}
		cycle = rotateTo(on.def.Name+"#", cycle[:len(cycle)-1])
		cycle = append(cycle, cycle[0])
		defs = cycleDefs(cycle)
		ptr := "/schema"
		if on.def.Variant != nil {
			ptr = "/variant"
		}
		fail(on, on.def.Name, ptr, "$ref cycle: %s refer to each other at the same place in a value (%s), so no value could ever be validated; "+
			"break the cycle, or refer through a keyword that descends into the value (properties, items)",
			strings.Join(append(defs, defs[0]), " -> "), strings.Join(cycle, " -> "))
	}
}

// rotateTo rotates a cycle (without its closing repeat) to start at the
// first element with the given prefix.
func rotateTo(prefix string, cycle []string) []string {
	for i, s := range cycle {
		if strings.HasPrefix(s, prefix) {
			return append(slices.Clone(cycle[i:]), cycle[:i]...)
		}
	}
	return cycle
}
