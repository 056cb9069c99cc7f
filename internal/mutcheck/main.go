// Command mutcheck shows that the kernel's guards are guarded: for each entry
// of its table it disables one check (a one-line source change, applied with
// `go test -overlay`, so the tree is never touched), runs the tests that are
// meant to catch it, and fails unless they fail. A mutation whose source text
// is no longer found is an error too, so the table cannot rot silently.
//
// A mutation of a TypeScript file (the executor in examples/executor-ts)
// cannot go through an overlay, which only the go command reads: it is
// applied to a copy of the package (its node_modules linked, the vectors
// file beside it as in the repository), compiled there with tsc (a mutated
// file that no longer type-checks is an error, not a catch), and the
// compiled node tests named by run (files under dist/, space-separated)
// must then fail.
//
//	go run ./internal/mutcheck            # every mutation
//	go run ./internal/mutcheck budget     # those whose name contains "budget"
//	go run ./internal/mutcheck -j 1       # one at a time (default: cores+1)
//	go run ./internal/mutcheck -times     # and the build and test time per package
//	go run ./internal/mutcheck -pkg ./kernel   # those whose tests are in ./kernel
//
// Mutations are checked several at once, each through its own overlay and
// temporary directory: the tree is shared and never written, and go's build
// cache is safe to share. Results print as they finish, each with the time
// its build took; the ones not caught are listed again at the end.
//
// Building is most of the cost, so the mutations of one package that only
// change an if's condition, or whole statements that declare nothing,
// share one build, a mutant schema (schema.go): each is behind a switch
// the test binary reads from AOS_MUTANT. Those a schema cannot hold, and
// any a schema does not catch, are built alone.
//
//	go run ./internal/mutcheck -schemata=false   # every mutation its own build
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// mutation replaces from (which must occur exactly once in file) with to,
// then expects `go test -run run pkg` to report a failing test; for a .ts
// file, `npm run build` and then `node --test run` in the package
// directory pkg.
type mutation struct {
	name     string
	file     string
	from, to string
	pkg, run string
}

func main() {
	jobs := flag.Int("j", runtime.NumCPU()+1, "mutations checked at once (many of their tests mostly wait)")
	times := flag.Bool("times", false, "print the build and test time summed per package at the end")
	pkgOnly := flag.String("pkg", "", "only the mutations whose tests are in this package (as the table names it: ./kernel)")
	schemata := flag.Bool("schemata", true, "build the mutations of one package that a schema can hold once, behind a switch (false: each its own build)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/mutcheck [-j N] [name-substring]")
		flag.PrintDefaults()
	}
	flag.Parse()
	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	only := flag.Arg(0)
	var todo []mutation
	for _, m := range mutations {
		if (only == "" || strings.Contains(m.name, only)) && (*pkgOnly == "" || m.pkg == *pkgOnly) {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		fatal(fmt.Errorf("no mutation matches %q (package %q)", only, *pkgOnly))
	}
	type result struct {
		m               mutation
		verdict, detail string
		took, built     time.Duration
	}
	results := make(chan result)
	q := newQueue()
	var single func(m mutation) func()
	single = func(m mutation) func() {
		return func() {
			t0 := time.Now()
			var built time.Duration
			verdict, detail := check(root, m, &built)
			results <- result{m, verdict, detail, time.Since(t0), built}
		}
	}
	// schemaTask builds s once, then queues each member's tests (first in
	// line: the binary is there), and checks one by one what the schema
	// could not hold or did not catch.
	var schemaTask func(s *schema) func()
	schemaTask = func(s *schema) func() {
		return func() {
			var ones []func()
			defer func() { q.pushFront(ones...) }()
			dir, err := os.MkdirTemp("", "mutcheck-schema-")
			if err != nil {
				fatal(err)
			}
			bin, env, took, detail := "", []string(nil), time.Duration(0), ""
			// A build the compiler refuses at lines of some members is
			// tried again without them (a few times: it stops at ten
			// errors); one it refuses elsewhere is given up.
			for try := 0; try < 4 && len(s.members) > 0; try++ {
				ov, left, over, err := s.write(root, dir)
				for _, m := range left {
					ones = append(ones, single(m))
				}
				switch {
				case len(over) > 1:
					ones = append(ones, schemaTask(&schema{pkg: s.pkg, members: over}))
				case len(over) == 1:
					ones = append(ones, single(over[0]))
				}
				if err != nil {
					detail = err.Error()
					break
				}
				var b time.Duration
				bin, env, b, _, detail = buildTest(root, dir, s.pkg, ov)
				took += b
				if bin != "" {
					break
				}
				bad := s.blame(detail)
				if bad == nil {
					break
				}
				var kept []mutation
				for _, m := range s.members {
					if bad[m.name] {
						ones = append(ones, single(m))
					} else {
						kept = append(kept, m)
					}
				}
				s.members = kept
			}
			results <- result{m: mutation{name: fmt.Sprintf("(%d in one build)", len(s.members)), pkg: s.pkg}, verdict: "schema", detail: firstLineOf(detail), took: took, built: took}
			if bin == "" {
				os.RemoveAll(dir)
				for _, m := range s.members {
					ones = append(ones, single(m))
				}
				return
			}
			// The last run removes the binary, before its result is sent:
			// the check ends only when every result is in.
			var running atomic.Int64
			running.Store(int64(len(s.members)))
			var runs []func()
			for _, m := range s.members {
				runs = append(runs, func() {
					t0 := time.Now()
					verdict, detail := runTest(root, bin, append(slices.Clip(env), mutantEnv+"="+m.name), m)
					if running.Add(-1) == 0 {
						os.RemoveAll(dir)
					}
					if verdict != "caught" {
						q.pushFront(single(m)) // said only by the ordinary check
						return
					}
					results <- result{m, verdict, detail, time.Since(t0), 0}
				})
			}
			ones = append(ones, runs...)
		}
	}
	// The end-to-end ones go first: they take longest, and started last
	// they would leave the other workers idle at the end; and schemas
	// before single mutations, since each one's build releases many runs.
	var groups []*schema
	singles := todo
	if *schemata {
		groups, singles = schemas(root, todo)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].pkg == "./cmd/aosd" && groups[j].pkg != "./cmd/aosd" })
	sort.SliceStable(singles, func(i, j int) bool { return slow(singles[i]) && !slow(singles[j]) })
	var tasks []func()
	for len(groups) > 0 || len(singles) > 0 {
		switch {
		case len(groups) > 0 && (groups[0].pkg == "./cmd/aosd" || len(singles) == 0 || !slow(singles[0])):
			tasks, groups = append(tasks, schemaTask(groups[0])), groups[1:]
		default:
			tasks, singles = append(tasks, single(singles[0])), singles[1:]
		}
	}
	q.pushBack(tasks...)
	var wg sync.WaitGroup
	for i := 0; i < max(*jobs, 1); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				task, ok := q.pop()
				if !ok {
					return
				}
				task()
				q.done()
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()
	t0 := time.Now()
	var failed []string
	perPkg := map[string]*pkgTime{}
	for r := range results {
		fmt.Printf("%-8s %-48s %5.1fs (build %4.1fs)  %s\n", r.verdict, r.m.name, r.took.Seconds(), r.built.Seconds(), r.detail)
		if r.verdict == "schema" {
			// A build several mutations share, not a mutation.
			pt := perPkg[r.m.pkg]
			if pt == nil {
				pt = &pkgTime{pkg: r.m.pkg}
				perPkg[r.m.pkg] = pt
			}
			pt.built += r.built
			continue
		}
		if r.verdict != "caught" {
			failed = append(failed, r.verdict+" "+r.m.name)
		}
		pt := perPkg[r.m.pkg]
		if pt == nil {
			pt = &pkgTime{pkg: r.m.pkg}
			perPkg[r.m.pkg] = pt
		}
		pt.n++
		pt.built += r.built
		pt.tested += r.took - r.built
	}
	if *times {
		printTimes(perPkg)
	}
	if len(failed) > 0 {
		// Said again at the end, where a log cut to its tail still shows it.
		sort.Strings(failed)
		fmt.Printf("%d of %d mutations were not caught by a failing test (%s, -j %d):\n  %s\n",
			len(failed), len(todo), time.Since(t0).Round(time.Second), *jobs, strings.Join(failed, "\n  "))
		os.Exit(1)
	}
	fmt.Printf("all %d mutations caught (%s, -j %d)\n", len(todo), time.Since(t0).Round(time.Second), *jobs)
}

// pkgTime is where a package's mutations spent their time.
type pkgTime struct {
	pkg           string
	n             int
	built, tested time.Duration
}

// printTimes prints the time per package, the costliest first: where a
// faster mutation check would come from.
func printTimes(per map[string]*pkgTime) {
	var all []*pkgTime
	for _, pt := range per {
		all = append(all, pt)
	}
	sort.Slice(all, func(i, j int) bool {
		ti, tj := all[i].built+all[i].tested, all[j].built+all[j].tested
		return ti > tj || ti == tj && all[i].pkg < all[j].pkg
	})
	fmt.Printf("%-22s %5s %9s %9s %9s\n", "package", "n", "build s", "test s", "s each")
	for _, pt := range all {
		fmt.Printf("%-22s %5d %9.0f %9.0f %9.1f\n", pt.pkg, pt.n, pt.built.Seconds(), pt.tested.Seconds(),
			(pt.built+pt.tested).Seconds()/float64(pt.n))
	}
}

// slow is whether m's tests are end-to-end: they build and drive aosd.
func slow(m mutation) bool { return m.pkg == "./cmd/aosd" }

// check applies m and runs its tests; *built is set to the time spent
// building the mutated code (the rest of the time was its tests).
func check(root string, m mutation, built *time.Duration) (verdict, detail string) {
	path := filepath.Join(root, m.file)
	src, err := os.ReadFile(path)
	if err != nil {
		return "ERROR", err.Error()
	}
	if n := bytes.Count(src, []byte(m.from)); n != 1 {
		return "ERROR", fmt.Sprintf("%s: the text to mutate occurs %d times (want 1): %q", m.file, n, m.from)
	}
	dir, err := os.MkdirTemp("", "mutcheck-")
	if err != nil {
		return "ERROR", err.Error()
	}
	defer os.RemoveAll(dir)
	mutatedSrc := bytes.Replace(src, []byte(m.from), []byte(m.to), 1)
	if strings.HasSuffix(m.file, ".ts") {
		return checkNode(root, dir, m, mutatedSrc, built)
	}
	mutated := filepath.Join(dir, filepath.Base(m.file))
	if err := os.WriteFile(mutated, mutatedSrc, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{path: mutated}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	bin, env, b, verdict, detail := buildTest(root, dir, m.pkg, ov)
	*built = b
	if bin == "" {
		return verdict, detail
	}
	return runTest(root, bin, env, m)
}

// buildTest builds the test binary of pkg into dir with the overlay file
// ov, and says the environment its tests must run with; bin is "" when it
// does not build (verdict and detail then say why).
//
// The overlay goes in GOFLAGS, not on the command line, so it also reaches
// the go commands the tests run themselves: cmd/aosd's end-to-end tests
// build the aosd binary they drive with `go build`. -vet=off: the
// unmutated tree passes go vet in CI already, and vet of the mutated
// package is not what decides a catch. The test binary is built first and
// run apart, so the two times can be told apart (most of a mutation's cost
// is building: the mutated package and everything above it in the test
// binary recompile). -ldflags=-w: no DWARF, which only a debugger reads;
// it makes each link (two for cmd/aosd, whose tests build aosd too) a
// third faster.
func buildTest(root, dir, pkg, ov string) (bin string, env []string, took time.Duration, verdict, detail string) {
	env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+ov+" -ldflags=-w"))
	bin = filepath.Join(dir, "mutant.test")
	t0 := time.Now()
	build := exec.Command("go", "test", "-c", "-vet=off", "-o", bin, pkg)
	build.Env = env
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", nil, time.Since(t0), "ERROR", "the mutated code does not build:\n" + string(out)
	}
	return bin, env, time.Since(t0), "", ""
}

// runTest runs m's tests in the test binary bin, as go test runs it: in
// the package's directory, with go test's default timeout and its check
// that a test does not call os.Exit(0). -failfast: the first failing test
// is the catch; the tests after it would only run with the guard still
// off (a budget check disabled lets the next test's cascade run for
// minutes).
func runTest(root, bin string, env []string, m mutation) (verdict, detail string) {
	cmd := exec.Command(bin, "-test.run", m.run, "-test.failfast", "-test.timeout=10m", "-test.paniconexit0")
	cmd.Env = env
	cmd.Dir = filepath.Join(root, m.pkg)
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "SURVIVED", "tests " + m.run + " passed with the check disabled"
	case (bytes.HasPrefix(out, []byte("panic: ")) || bytes.Contains(out, []byte("\npanic: "))) && !bytes.Contains(out, []byte("--- FAIL")):
		// A test binary that panics fails its test: the check was needed
		// even to keep the kernel from crashing.
		return "caught", "a test panicked"
	case bytes.Contains(out, []byte("\nfatal error: ")) && !bytes.Contains(out, []byte("--- FAIL")):
		// Killed by a fatal runtime error (the SIGBUS of a write to a
		// mapped file on a full disk): the test failed as hard as a test
		// can.
		return "caught", "a test died: " + firstLineAfter(out, "fatal error: ")
	case !bytes.Contains(out, []byte("--- FAIL")):
		return "ERROR", "the tests failed without a failing test:\n" + string(out)
	}
	return "caught", firstFail(out)
}

// nodeFiles are what a node package's tests read from outside it.
var nodeFiles = []string{"docs/receipt-vectors.json"}

// checkNode copies the package m.pkg into dir (node_modules linked, not
// copied; its build output left behind), writes the mutated file there,
// compiles the package, and runs its compiled node tests m.run.
func checkNode(root, dir string, m mutation, mutated []byte, built *time.Duration) (verdict, detail string) {
	pkg := filepath.Join(root, m.pkg)
	if _, err := os.Stat(filepath.Join(pkg, "node_modules")); err != nil {
		return "ERROR", fmt.Sprintf("%s: run npm ci there first: %v", m.pkg, err)
	}
	copyDir := filepath.Join(dir, m.pkg)
	err := filepath.WalkDir(pkg, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(pkg, path)
		to := filepath.Join(copyDir, rel)
		switch {
		case d.IsDir() && d.Name() == "node_modules":
			if err := os.Symlink(path, to); err != nil {
				return err
			}
			return filepath.SkipDir
		case d.IsDir() && rel == "dist":
			return filepath.SkipDir // built afresh below, from the mutated sources
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return "ERROR", err.Error()
	}
	for _, f := range nodeFiles {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "ERROR", err.Error()
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			return "ERROR", err.Error()
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "ERROR", err.Error()
		}
	}
	rel, err := filepath.Rel(m.pkg, m.file)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "ERROR", fmt.Sprintf("%s is not in the package %s", m.file, m.pkg)
	}
	if err := os.WriteFile(filepath.Join(copyDir, rel), mutated, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	t0 := time.Now()
	build := exec.Command("npm", "run", "--silent", "build")
	build.Dir = copyDir
	if out, err := build.CombinedOutput(); err != nil {
		return "ERROR", "the mutated code does not type-check (npm run build):\n" + string(out)
	}
	*built = time.Since(t0)
	// A mutation that makes the code wait forever (a retry loop that never
	// gives up) fails by the per-test timeout instead of hanging the check.
	cmd := exec.Command("node", append([]string{"--test", "--test-timeout=20000"}, strings.Fields(m.run)...)...)
	cmd.Dir = copyDir
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "SURVIVED", "node tests " + m.run + " passed with the check disabled"
	case !bytes.Contains(out, []byte("\nnot ok ")):
		return "ERROR", "node --test failed without a failing test:\n" + string(out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "not ok ") {
			return "caught", strings.TrimSpace(l)
		}
	}
	return "caught", ""
}

func firstFail(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutcheck:", err)
	os.Exit(2)
}

// firstLineAfter is the rest of the line of out that starts with prefix.
func firstLineAfter(out []byte, prefix string) string {
	i := bytes.Index(out, []byte(prefix))
	if i < 0 {
		return ""
	}
	line := out[i:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	return string(line)
}
