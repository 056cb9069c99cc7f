package manifest

import (
	"fmt"
	"sort"
	"strings"
)

// String renders one problem as "file: def: /pointer: message", leaving out
// the parts that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	for _, part := range []string{p.File, p.Def, p.Pointer} {
		if part != "" {
			b.WriteString(part)
			b.WriteString(": ")
		}
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error prints one line per problem.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sortProblems orders problems by file, then by position in the file, keeping
// discovery order for problems at the same place.
func sortProblems(ps Problems, fileOrder map[string]int) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			fa, oka := fileOrder[a.File]
			fb, okb := fileOrder[b.File]
			if oka && okb {
				return fa < fb
			}
			if oka != okb {
				return !oka // problems about the whole load (no known file) first
			}
			return a.File < b.File
		}
		return comparePtr(a.Pointer, b.Pointer) < 0
	})
}

// collector accumulates problems during one load.
type collector struct {
	ps Problems
}

func (c *collector) addf(file, def, ptr, format string, args ...any) {
	c.ps = append(c.ps, Problem{File: file, Def: def, Pointer: ptr, Msg: fmt.Sprintf(format, args...)})
}
