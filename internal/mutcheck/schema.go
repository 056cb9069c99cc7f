package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// schema is the mutations of one test package built together.
type schema struct {
	pkg     string
	members []mutation
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
	for _, m := range todo {
		if _, ok := schemaText(m); !ok {
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
// found once, or overlaps another's, are left out of the schema and
// returned, to be checked one by one.
func (s *schema) write(root, dir string) (ov string, left []mutation, err error) {
	type edit struct {
		at int
		m  mutation
	}
	byFile := map[string][]edit{}
	srcs := map[string][]byte{}
	for _, m := range s.members {
		path := filepath.Join(root, m.file)
		src, ok := srcs[path]
		if !ok {
			if src, err = os.ReadFile(path); err != nil {
				return "", nil, err
			}
			srcs[path] = src
		}
		if bytes.Count(src, []byte(m.from)) != 1 {
			left = append(left, m) // the check one by one says so
			continue
		}
		byFile[path] = append(byFile[path], edit{bytes.Index(src, []byte(m.from)), m})
	}
	replace := map[string]string{}
	var kept []mutation
	n := 0
	for path, edits := range byFile {
		sort.Slice(edits, func(i, j int) bool { return edits[i].at < edits[j].at })
		src := srcs[path]
		var b []byte
		last := 0
		for _, e := range edits {
			if e.at < last {
				left = append(left, e.m) // overlaps the one before it
				continue
			}
			text, _ := schemaText(e.m)
			b = append(b, src[last:e.at]...)
			b = append(b, text...)
			last = e.at + len(e.m.from)
			kept = append(kept, e.m)
		}
		b = append(b, src[last:]...)
		n++
		to := filepath.Join(dir, fmt.Sprintf("%d-%s", n, filepath.Base(path)))
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", nil, err
		}
		replace[path] = to
		// The switch, once per package directory.
		sw := filepath.Join(filepath.Dir(path), switchFile)
		if _, ok := replace[sw]; ok {
			continue
		}
		if _, err := os.Stat(sw); err == nil {
			return "", nil, fmt.Errorf("%s exists: the schema's switch would replace it", sw)
		}
		pc := packageClause.FindSubmatch(src)
		if pc == nil {
			return "", nil, fmt.Errorf("%s: no package clause", path)
		}
		swTo := filepath.Join(dir, fmt.Sprintf("%d-%s", n, switchFile))
		text := fmt.Sprintf("package %s\n\nimport \"os\"\n\nvar mutcheckMutant = os.Getenv(%q)\n\nfunc mutcheckOn(name string) bool { return mutcheckMutant == name }\n", pc[1], mutantEnv)
		if err := os.WriteFile(swTo, []byte(text), 0o644); err != nil {
			return "", nil, err
		}
		replace[sw] = swTo
	}
	s.members = kept
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ov = filepath.Join(dir, "overlay.json")
	return ov, left, os.WriteFile(ov, overlay, 0o644)
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
