package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aos-kernel/aos/build"
)

func cmdDemo(fs *flag.FlagSet, a *app) func([]string) error {
	manifests := fs.String("manifests", filepath.Join("examples", "manifests"), "directory holding the example manifests")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		worldSet := false
		fs.Visit(func(f *flag.Flag) { worldSet = worldSet || f.Name == "world" })
		tmp, err := os.MkdirTemp("", "aos-demo-")
		if err != nil {
			return err
		}
		if !worldSet {
			a.world = filepath.Join(tmp, "world")
		}
		counter := filepath.Join(*manifests, "counter")
		if _, err := os.Stat(counter); err != nil {
			return fmt.Errorf("counter example not found at %s: run from the repository root or pass --manifests", counter)
		}
		// The manifest is built and applied from a copy, so the demo never
		// rewrites the repository's files (a Go release other than the one
		// that pinned the example's hash builds other bytes).
		m := filepath.Join(tmp, "counter")
		fmt.Fprintf(a.stdout, "$ cp %s %s/\n", filepath.Join(counter, "*.json"), m)
		if err := build.Copy(counter, m); err != nil {
			return err
		}
		step := func(world bool, args ...string) error {
			if world {
				args = append(args, "--world", a.world)
			}
			fmt.Fprintf(a.stdout, "\n$ aosd %s\n", strings.Join(quoteArgs(args), " "))
			code := run(a.ctx, args, a.stdin, a.stdout, a.stderr)
			if code != exitOK {
				return &exitCodeError{code}
			}
			return nil
		}
		if err := step(false, "build", m, "--sources-from", counter); err != nil {
			return err
		}
		wf := "com.example/counter.step@1"
		for _, s := range [][]string{
			{"init"},
			{"apply", m},
			{"send", "com.example/CountEvent@1", `{"key":"a","by":1}`},
			{"send", "com.example/CountEvent@1", `{"key":"a","by":41}`},
			{"send", "com.example/CountEvent@1", `{"key":"b","by":7}`},
			{"status"},
			{"cells", "ls", wf},
			{"cells", "show", wf, "a"},
			{"trace", wf, "a"},
			{"journal", "--limit", "6"},
		} {
			if err := step(true, s...); err != nil {
				return err
			}
		}
		fmt.Fprintf(a.stdout, "\nThe world is in %s; try: aosd serve --world %s\n", a.world, a.world)
		return nil
	}
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, s := range args {
		if strings.ContainsAny(s, ` "{}'`) {
			s = "'" + s + "'"
		}
		out[i] = s
	}
	return out
}
