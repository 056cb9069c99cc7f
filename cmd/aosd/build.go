package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aos-kernel/aos/build"
)

func cmdBuild(fs *flag.FlagSet, a *app) func([]string) error {
	from := fs.String("sources-from", "", `resolve relative "source" paths against DIR instead of each JSON file's directory (for a manifest copied away from its sources)`)
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 1, "[PATH] (a manifest file or directory; default .)"); err != nil {
			return err
		}
		path := "."
		if len(pos) == 1 {
			path = pos[0]
		} else if hint := manifestDirHint(path); hint != "" {
			return errors.New(hint)
		}
		rep, err := build.Build(a.ctx, path, build.Options{SourcesFrom: *from, Log: a.stderr, GOROOT: os.Getenv(envGOROOT)})
		if rep != nil {
			if a.json {
				if perr := a.printJSON(rep); perr != nil {
					return perr
				}
			} else {
				printBuild(a.stdout, path, rep)
			}
		}
		return err
	}
}

func printBuild(w io.Writer, path string, rep *build.Report) {
	if len(rep.Modules) == 0 {
		fmt.Fprintf(w, "nothing to build: no wasm module in %s names a \"source\"\n", path)
	} else {
		t := newTable(w)
		t.row("MODULE", "ARTIFACT", "BYTES", "HASH", "CHANGED")
		for _, m := range rep.Modules {
			changed := "no"
			if m.Changed {
				changed = "yes"
			}
			t.row(m.Name, relPath(m.Artifact), m.Bytes, m.Hash, changed)
		}
		t.flush()
	}
	for _, n := range rep.Prebuilt {
		fmt.Fprintf(w, "%s names no source; its artifact is used as it is\n", n)
	}
	if rep.ManifestHash != "" {
		fmt.Fprintf(w, "manifest %s %s\n", rep.ManifestName, rep.ManifestHash)
	}
}

// relPath shows p relative to the working directory when it is below it.
func relPath(p string) string {
	wd, err := filepath.Abs(".")
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && filepath.IsLocal(r) {
		return r
	}
	return p
}

// manifestDirHint says which directory to pass when dir, the default PATH,
// holds no manifest (*.json) but directories right below it do, as the
// root of a project `aosd new` made does (its manifest is in manifest/).
// It is "" when dir has JSON files of its own or no such directory.
func manifestDirHint(dir string) string {
	if js, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(js) > 0 {
		return ""
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var dirs []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if js, _ := filepath.Glob(filepath.Join(dir, e.Name(), "*.json")); len(js) > 0 {
			dirs = append(dirs, e.Name())
		}
	}
	abs, _ := filepath.Abs(dir)
	switch len(dirs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("no manifest (*.json) in %s, the default PATH; its directory %s/ has one: run aosd build %s", abs, dirs[0], dirs[0])
	}
	return fmt.Sprintf("no manifest (*.json) in %s, the default PATH; pass the manifest directory, one of: %s", abs, strings.Join(dirs, ", "))
}
