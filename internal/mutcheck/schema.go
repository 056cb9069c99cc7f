package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Mutant schemata. Most of a mutation's time is building its test binary
// (the mutated package, every package above it in the binary, the link),
// and the mutations of one package rebuild the same packages over and over.
// A mutation of the shape
//
//	if COND {      ->   if COND2 {
//	if INIT; COND {  ->   if INIT; COND2 {
//
// (that line changed, any lines around it the same) is instead written
// into the source once, beside the others of its package, behind a switch:
//
//	if (mutcheckOn("name") && (COND2)) || (!mutcheckOn("name") && (COND)) {
//
// where mutcheckOn reads AOS_MUTANT from the environment (a file added
// through the same overlay). With AOS_MUTANT naming the mutation the
// condition is COND2 alone, and COND is not evaluated; with it unset, COND
// alone: the code is the mutated code, or the original, exactly. One build
// then serves every such mutation of the package; each runs its tests with
// its own name in AOS_MUTANT (processes the tests start, the aosd of the
// end-to-end tests, inherit it). A schema that does not build, and a
// mutation that survives in one, are checked again the ordinary way, so a
// schema can never hide a surviving mutation nor turn a catch into an error.

// mutantEnv names the switched-on mutation of a schema's test binary.
const mutantEnv = "AOS_MUTANT"

// switchFile is the file the overlay adds to each package with a schema.
const switchFile = "zz_mutcheck_switch.go"

// A mutation that changes whole statements instead (the lines it touches,
// taken whole, parse as a list of statements before and after, and neither
// list declares a name, a label, or holds a goto or fallthrough at its top
// level) is written as
//
//	if mutcheckOn("name") {
//		TO
//	} else {
//		FROM
//	}
//
// Both blocks see the names FROM saw, and since neither list declares one,
// nothing after them can see a name the block took away: the code run is
// again the mutated or the original statements, exactly. A statement
// mutation of an if's first line is of the first shape, which keeps the
// file's line numbers. A mutation whose lines are not statements where they
// stand (a case clause, a field of a literal) makes the schema fail to
// build; the compiler's errors name the lines, and the mutations they fall
// in are taken out and the schema built again (main.go: schemaTask).
//
// One difference stays, in both shapes: Go refuses a name declared and
// never used, and in a schema the original side still uses what the
// mutated side drops. A mutation that alone would not build for that
// reason builds in a schema; the code it runs is still the mutated code
// exactly, so its catch means the same, but the table's text should build
// alone too (go run ./internal/mutcheck -schemata=false NAME says so).

// schema is the mutations of one test package built together.
type schema struct {
	pkg     string
	members []mutation
	// at is where each member's text stands in the schema's sources, by
	// name: the file the overlay puts in place and its lines, so a build
	// error can be laid at a member's door.
	at map[string]span
}

// span is lines first..last of the file path.
type span struct {
	path        string
	first, last int
}

// schemaEdit is the edit a schema makes to src (the file m mutates) for m:
// the bytes [at, end) are replaced by text; ok is false when a schema
// cannot hold m.
func schemaEdit(m mutation, src []byte) (at, end int, text string, ok bool) {
	if bytes.Count(src, []byte(m.from)) != 1 {
		return 0, 0, "", false
	}
	at = bytes.Index(src, []byte(m.from))
	end = at + len(m.from)
	if text, ok := schemaText(m); ok {
		return at, end, text, true
	}
	if !strings.HasSuffix(m.file, ".go") || strings.HasSuffix(m.file, "_test.go") {
		return 0, 0, "", false
	}
	// Whole lines: from the start of from's first line to the end of its
	// last (a from that ends in a newline ends there).
	lineAt := bytes.LastIndexByte(src[:at], '\n') + 1
	lineEnd := end
	if !strings.HasSuffix(m.from, "\n") {
		if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
			lineEnd = end + i
		} else {
			lineEnd = len(src)
		}
	}
	before, after := string(src[lineAt:at]), string(src[end:lineEnd])
	if text, ok = stmtSchemaText(m.name, before+m.from+after, before+m.to+after); ok {
		return lineAt, lineEnd, text, true
	}
	// Not whole statements (an if's first line, a case, a field of a
	// literal): the lines of the innermost statement that holds them, in
	// the list of a block or a clause, mutated and whole.
	lineAt, lineEnd, ok = enclosingStmt(src, at, end)
	if !ok {
		return 0, 0, "", false
	}
	whole := string(src[lineAt:lineEnd])
	text, ok = stmtSchemaText(m.name, whole, strings.Replace(whole, m.from, m.to, 1))
	return lineAt, lineEnd, text, ok
}

// enclosingStmt is the whole lines [at, end) of the innermost statement of
// src (a Go file) that holds the bytes [from, to) and stands in a list of
// statements (a block's, a case's); ok is false if there is none.
func enclosingStmt(src []byte, from, to int) (at, end int, ok bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		return 0, 0, false
	}
	best := -1
	list := func(stmts []ast.Stmt) {
		for _, st := range stmts {
			switch st.(type) {
			case *ast.CaseClause, *ast.CommClause:
				continue // a clause, not a statement that stands alone
			}
			a, e := fset.Position(st.Pos()).Offset, fset.Position(st.End()).Offset
			if a <= from && to <= e && (best < 0 || e-a < end-at) {
				best, at, end = a, a, e
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BlockStmt:
			list(n.List)
		case *ast.CaseClause:
			list(n.Body)
		case *ast.CommClause:
			list(n.Body)
		}
		return true
	})
	if best < 0 {
		return 0, 0, false
	}
	at = bytes.LastIndexByte(src[:at], '\n') + 1
	if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
		end += i
	} else {
		end = len(src)
	}
	return at, end, true
}

// stmtSchemaText is the schema's text for whole lines from that a mutation
// turns into to, and whether both are statements a schema can switch
// between (see above).
func stmtSchemaText(name, from, to string) (string, bool) {
	if !plainStmts(from, false) || !plainStmts(to, true) {
		return "", false
	}
	indent := from[:len(from)-len(strings.TrimLeft(from, " \t"))]
	trail := ""
	if strings.HasSuffix(from, "\n") {
		trail = "\n"
	}
	from, to = strings.TrimSuffix(from, "\n"), strings.TrimSuffix(to, "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "%sif mutcheckOn(%q) {\n", indent, name)
	if strings.TrimSpace(to) != "" {
		b.WriteString(to + "\n")
	}
	b.WriteString(indent + "} else {\n" + from + "\n" + indent + "}" + trail)
	return b.String(), true
}

// plainStmts is whether s parses as a list of statements (none at all only
// if empty is allowed) that declares no name and no label at its top level
// and holds no goto or fallthrough there: such a list means the same
// inside a block of its own.
func plainStmts(s string, empty bool) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n\nfunc _() {\n"+s+"\n}\n", 0)
	if err != nil || len(f.Decls) != 1 {
		return false
	}
	fn, ok := f.Decls[0].(*ast.FuncDecl)
	if !ok || fn.Body == nil || (len(fn.Body.List) == 0 && !empty) {
		return false
	}
	for _, st := range fn.Body.List {
		switch st := st.(type) {
		case *ast.DeclStmt, *ast.LabeledStmt:
			return false
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				return false
			}
		case *ast.BranchStmt:
			if st.Tok == token.GOTO || st.Tok == token.FALLTHROUGH {
				return false
			}
		}
	}
	return true
}

// schemaText is the text that replaces m.from in a schema, and whether m
// has a shape a schema can hold.
func schemaText(m mutation) (string, bool) {
	if !strings.HasSuffix(m.file, ".go") || strings.HasSuffix(m.file, "_test.go") {
		return "", false
	}
	// Exactly one line differs, an if's first line; the lines around it
	// are the same.
	fls, tls := strings.Split(m.from, "\n"), strings.Split(m.to, "\n")
	if len(fls) != len(tls) {
		return "", false
	}
	at := -1
	for i := range fls {
		if fls[i] != tls[i] {
			if at >= 0 {
				return "", false
			}
			at = i
		}
	}
	if at < 0 {
		return "", false
	}
	fp, fc, ok1 := ifCond(fls[at])
	tp, tc, ok2 := ifCond(tls[at])
	if !ok1 || !ok2 || fp != tp {
		return "", false
	}
	finit, fexpr := splitInit(fc)
	tinit, texpr := splitInit(tc)
	if finit != tinit || strings.TrimSpace(fexpr) == "" || strings.TrimSpace(texpr) == "" {
		return "", false
	}
	on := fmt.Sprintf("mutcheckOn(%q)", m.name)
	out := slices.Clone(fls)
	out[at] = fmt.Sprintf("%sif %s(%s && (%s)) || (!%s && (%s)) {", fp, finit, on, texpr, on, fexpr)
	return strings.Join(out, "\n"), true
}

func firstLine(s string) (line, rest string) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// ifCond splits "PREFIX if COND {", where PREFIX is blank or ends in
// "else ".
func ifCond(line string) (prefix, cond string, ok bool) {
	i := strings.Index(line, "if ")
	if i < 0 || !strings.HasSuffix(line, " {") || i+3 > len(line)-2 {
		return "", "", false
	}
	prefix = line[:i]
	if strings.TrimLeft(prefix, " \t") != "" && !strings.HasSuffix(prefix, "else ") {
		return "", "", false
	}
	return prefix, line[i+3 : len(line)-2], true
}

// splitInit splits an if's "INIT; COND" (the init ending with "; ").
func splitInit(cond string) (init, expr string) {
	if i := strings.LastIndex(cond, "; "); i >= 0 {
		return cond[:i+2], cond[i+2:]
	}
	return "", cond
}

// schemas sorts todo into the schemas worth building (two mutations or
// more of one test package) and the mutations checked one by one.
func schemas(root string, todo []mutation) (out []*schema, single []mutation) {
	byPkg := map[string]*schema{}
	var order []string
	srcs := map[string][]byte{}
	for _, m := range todo {
		src, ok := srcs[m.file]
		if !ok {
			src, _ = os.ReadFile(filepath.Join(root, m.file)) // unread: the check one by one says why
			srcs[m.file] = src
		}
		if _, _, _, ok := schemaEdit(m, src); !ok {
			single = append(single, m)
			continue
		}
		s := byPkg[m.pkg]
		if s == nil {
			s = &schema{pkg: m.pkg}
			byPkg[m.pkg] = s
			order = append(order, m.pkg)
		}
		s.members = append(s.members, m)
	}
	for _, pkg := range order {
		s := byPkg[pkg]
		if len(s.members) < 2 {
			single = append(single, s.members...)
			continue
		}
		out = append(out, s)
	}
	return out, single
}

var packageClause = regexp.MustCompile(`(?m)^package\s+(\w+)`)

// write writes s's sources and switch files into dir and an overlay that
// names them, and returns the overlay's path. Members whose text is not
// found once are left out of the schema and returned, to be checked one by
// one; those whose edit overlaps another's (two cases of one switch) are
// left out too and returned in over, for a schema of their own.
func (s *schema) write(root, dir string) (ov string, left, over []mutation, err error) {
	type edit struct {
		at, end int
		text    string
		m       mutation
	}
	byFile := map[string][]edit{}
	srcs := map[string][]byte{}
	for _, m := range s.members {
		path := filepath.Join(root, m.file)
		src, ok := srcs[path]
		if !ok {
			if src, err = os.ReadFile(path); err != nil {
				return "", nil, nil, err
			}
			srcs[path] = src
		}
		at, end, text, ok := schemaEdit(m, src)
		if !ok {
			left = append(left, m) // the check one by one says why
			continue
		}
		byFile[path] = append(byFile[path], edit{at, end, text, m})
	}
	s.at = map[string]span{}
	replace := map[string]string{}
	var kept []mutation
	n := 0
	for path, edits := range byFile {
		sort.Slice(edits, func(i, j int) bool { return edits[i].at < edits[j].at })
		src := srcs[path]
		n++
		to := filepath.Join(dir, fmt.Sprintf("%d-%s", n, filepath.Base(path)))
		var b []byte
		last := 0
		for _, e := range edits {
			if e.at < last {
				over = append(over, e.m) // overlaps the one before it
				continue
			}
			b = append(b, src[last:e.at]...)
			first := bytes.Count(b, []byte("\n")) + 1
			b = append(b, e.text...)
			s.at[e.m.name] = span{to, first, first + strings.Count(strings.TrimSuffix(e.text, "\n"), "\n")}
			last = e.end
			kept = append(kept, e.m)
		}
		b = append(b, src[last:]...)
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", nil, nil, err
		}
		replace[path] = to
		// The switch, once per package directory.
		sw := filepath.Join(filepath.Dir(path), switchFile)
		if _, ok := replace[sw]; ok {
			continue
		}
		if _, err := os.Stat(sw); err == nil {
			return "", nil, nil, fmt.Errorf("%s exists: the schema's switch would replace it", sw)
		}
		pc := packageClause.FindSubmatch(src)
		if pc == nil {
			return "", nil, nil, fmt.Errorf("%s: no package clause", path)
		}
		swTo := filepath.Join(dir, fmt.Sprintf("%d-%s", n, switchFile))
		text := fmt.Sprintf("package %s\n\nimport \"os\"\n\nvar mutcheckMutant = os.Getenv(%q)\n\nfunc mutcheckOn(name string) bool { return mutcheckMutant == name }\n", pc[1], mutantEnv)
		if err := os.WriteFile(swTo, []byte(text), 0o644); err != nil {
			return "", nil, nil, err
		}
		replace[sw] = swTo
	}
	s.members = kept
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ov = filepath.Join(dir, "overlay.json")
	return ov, left, over, os.WriteFile(ov, overlay, 0o644)
}

// compileError is the file and line a compiler error names.
var compileError = regexp.MustCompile(`(?m)^(\S+\.go):(\d+):\d+: `)

// blame is the members of s whose lines the compiler errors in out (a
// failed build of s) name; nil if out names no line, or one of none of
// them: then the schema as a whole is at fault.
func (s *schema) blame(out string) map[string]bool {
	errs := compileError.FindAllStringSubmatch(out, -1)
	if len(errs) == 0 {
		return nil
	}
	bad := map[string]bool{}
	for _, e := range errs {
		line, _ := strconv.Atoi(e[2])
		found := false
		for name, sp := range s.at {
			if sp.path == e[1] && sp.first <= line && line <= sp.last {
				bad[name], found = true, true
			}
		}
		if !found {
			return nil
		}
	}
	return bad
}

// queue is the work of the check: tasks run by -j workers, where a task
// may add more (a schema's build adds its members' runs, first in line).
type queue struct {
	mu      sync.Mutex
	wake    *sync.Cond
	tasks   []func()
	pending int // queued or running
}

func newQueue() *queue {
	q := &queue{}
	q.wake = sync.NewCond(&q.mu)
	return q
}

func (q *queue) pushBack(ts ...func()) {
	q.mu.Lock()
	q.tasks = append(q.tasks, ts...)
	q.pending += len(ts)
	q.mu.Unlock()
	q.wake.Broadcast()
}

func (q *queue) pushFront(ts ...func()) {
	q.mu.Lock()
	q.tasks = append(append([]func(){}, ts...), q.tasks...)
	q.pending += len(ts)
	q.mu.Unlock()
	q.wake.Broadcast()
}

// pop waits for a task; ok is false when none is queued or running, so
// none can come.
func (q *queue) pop() (task func(), ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.tasks) == 0 && q.pending > 0 {
		q.wake.Wait()
	}
	if len(q.tasks) == 0 {
		return nil, false
	}
	task, q.tasks = q.tasks[0], q.tasks[1:]
	return task, true
}

// done marks a popped task finished (after any tasks it added).
func (q *queue) done() {
	q.mu.Lock()
	q.pending--
	q.mu.Unlock()
	q.wake.Broadcast()
}

// firstLineOf is s up to its first newline.
func firstLineOf(s string) string {
	line, _ := firstLine(s)
	return line
}
