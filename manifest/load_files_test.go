//go:build unix

package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/manifest"
)

// Load reads only regular files of bounded size: the daemon loads manifests
// from paths its callers give (apply and shadow's "path"), and a device, a
// FIFO or a huge file must be refused, not read forever or waited on.
func TestLoadReadsOnlyBoundedRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, []byte("["), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, manifest.MaxFileBytes+1); err != nil { // sparse
		t.Fatal(err)
	}
	cases := []struct{ name, path, msg string }{
		{"fifo", fifo, "not a regular file"},
		{"over the limit", huge, "larger than the 67108864-byte limit"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ name, path, msg string }{"device", "/dev/zero", "not a regular file"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := manifest.Load(c.path)
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].File != c.path || !strings.Contains(ps[0].Msg, c.msg) {
				t.Fatalf("got %v, want one problem in %s saying %q", ps, c.path, c.msg)
			}
		})
	}
}

func TestLoadRefusesAnArtifactThatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.wasm"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := world(map[string]string{"m": `{"$kind":"defmodule","name":"com.t/mod@1","runtime":{"kind":"wasm","artifact":"pipe.wasm","hash":"sha256:` + strings.Repeat("0", 64) + `"}}`})
	path := filepath.Join(dir, "world.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := manifest.Load(path)
	ps := problemsOf(t, err)
	if len(ps) != 1 || !strings.Contains(ps[0].Msg, "cannot read wasm artifact") || !strings.Contains(ps[0].Msg, "not a regular file") {
		t.Fatalf("got %v, want the artifact refused as not a regular file", ps)
	}
}
