package daemon_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/daemon"
	"github.com/aos-kernel/aos/schemas"
)

const artifactCode = "\x00asm pretend module bytes"

func wasmManifestFiles() []daemon.File {
	h := schemas.HashBytes([]byte(artifactCode))
	defs := fmt.Sprintf(`[
 {"$kind":"defschema","name":"t/S@1","schema":{"type":"object"}},
 {"$kind":"defmodule","name":"t/mod@1","runtime":{"kind":"wasm","artifact":"build/mod.wasm","hash":%q}},
 {"$kind":"defworkflow","name":"t/wf@1","state":"t/S@1","event":"t/S@1","effects_emitted":[],"impl":{"module":"t/mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"t/world","routing":{"subscriptions":[{"event":"t/S@1","workflow":"t/wf@1"}]}}
]`, h)
	return []daemon.File{{Name: "world.json", Content: []byte(defs)}}
}

func artifactFile(b string) daemon.File {
	return daemon.File{Name: "build/mod.wasm", Base64: base64.StdEncoding.EncodeToString([]byte(b))}
}

// TestApplyUploadsArtifacts: POST /v1/apply carries wasm artifacts as base64
// files matched to modules by hash; one the world already stores need not be
// sent again; a missing or mangled one is a clear 400 naming it.
func TestApplyUploadsArtifacts(t *testing.T) {
	none := func(schemas.Hash) ([]byte, error) { return nil, errors.New("not stored") }
	stored := func(h schemas.Hash) ([]byte, error) {
		if h == schemas.HashBytes([]byte(artifactCode)) {
			return []byte(artifactCode), nil
		}
		return nil, errors.New("not stored")
	}

	m, err := daemon.LoadManifest(daemon.ApplyRequest{Files: append(wasmManifestFiles(), artifactFile(artifactCode))}, none)
	if err != nil {
		t.Fatalf("uploaded artifact: %v", err)
	}
	if got := string(m.Modules["t/mod@1"].Runtime.Bytes); got != artifactCode {
		t.Fatalf("module bytes %q", got)
	}

	m, err = daemon.LoadManifest(daemon.ApplyRequest{Files: wasmManifestFiles()}, stored)
	if err != nil {
		t.Fatalf("artifact the world stores: %v", err)
	}
	if got := string(m.Modules["t/mod@1"].Runtime.Bytes); got != artifactCode {
		t.Fatalf("module bytes from the store %q", got)
	}

	for _, c := range []struct {
		name  string
		files []daemon.File
		wants []string
	}{
		{"missing", wasmManifestFiles(), []string{"t/mod@1", "build/mod.wasm", "not found"}},
		{"other bytes", append(wasmManifestFiles(), artifactFile("something else")), []string{"t/mod@1", "build/mod.wasm"}},
		{"bad base64", append(wasmManifestFiles(), daemon.File{Name: "build/mod.wasm", Base64: "%%%"}), []string{"files[1].base64", "build/mod.wasm", "base64"}},
		{"both", append(wasmManifestFiles(), daemon.File{Name: "x.wasm", Base64: "AA==", Content: []byte(`{}`)}), []string{"files[1]", "both"}},
		{"artifacts only", []daemon.File{artifactFile(artifactCode)}, []string{"at least one .json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := daemon.LoadManifest(daemon.ApplyRequest{Files: c.files}, none)
			var de *daemon.Error
			if !errors.As(err, &de) || de.Status != http.StatusBadRequest {
				t.Fatalf("got %v, want a 400", err)
			}
			text := de.Where + ": " + de.Message
			for _, w := range c.wants {
				if !strings.Contains(text, w) {
					t.Errorf("error %q does not say %q", text, w)
				}
			}
		})
	}
}
