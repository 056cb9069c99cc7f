package api_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/schemas"
)

const artifactCode = "\x00asm pretend module bytes"

func wasmManifestFiles() []api.File {
	h := schemas.HashBytes([]byte(artifactCode))
	defs := fmt.Sprintf(`[
 {"$kind":"defschema","name":"t/S@1","schema":{"type":"object"}},
 {"$kind":"defmodule","name":"t/mod@1","runtime":{"kind":"wasm","artifact":"build/mod.wasm","hash":%q}},
 {"$kind":"defworkflow","name":"t/wf@1","state":"t/S@1","event":"t/S@1","effects_emitted":[],"impl":{"module":"t/mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"t/world","routing":{"subscriptions":[{"event":"t/S@1","workflow":"t/wf@1"}]}}
]`, h)
	return []api.File{{Name: "world.json", Content: []byte(defs)}}
}

func artifactFile(b string) api.File {
	return api.File{Name: "build/mod.wasm", Base64: base64.StdEncoding.EncodeToString([]byte(b))}
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

	m, err := api.LoadManifest(api.ApplyRequest{Files: append(wasmManifestFiles(), artifactFile(artifactCode))}, none)
	if err != nil {
		t.Fatalf("uploaded artifact: %v", err)
	}
	if got := string(m.Modules["t/mod@1"].Runtime.Bytes); got != artifactCode {
		t.Fatalf("module bytes %q", got)
	}

	m, err = api.LoadManifest(api.ApplyRequest{Files: wasmManifestFiles()}, stored)
	if err != nil {
		t.Fatalf("artifact the world stores: %v", err)
	}
	if got := string(m.Modules["t/mod@1"].Runtime.Bytes); got != artifactCode {
		t.Fatalf("module bytes from the store %q", got)
	}

	for _, c := range []struct {
		name  string
		files []api.File
		wants []string
	}{
		{"missing", wasmManifestFiles(), []string{"t/mod@1", "build/mod.wasm", "was not uploaded", `send it in "files" as {"name": "build/mod.wasm", "base64": ...}`}},
		{"other bytes", append(wasmManifestFiles(), artifactFile("something else")), []string{"t/mod@1", "build/mod.wasm",
			"has hash " + schemas.HashBytes([]byte("something else")).String() + " but the def declares " + schemas.HashBytes([]byte(artifactCode)).String()}},
		{"bad base64", append(wasmManifestFiles(), api.File{Name: "build/mod.wasm", Base64: "%%%"}), []string{"files[1].base64", "build/mod.wasm", "base64"}},
		{"both", append(wasmManifestFiles(), api.File{Name: "x.wasm", Base64: "AA==", Content: []byte(`{}`)}), []string{"files[1]", "both"}},
		{"artifacts only", []api.File{artifactFile(artifactCode)}, []string{"at least one .json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := api.LoadManifest(api.ApplyRequest{Files: c.files}, none)
			var de *api.Error
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

// TestApplyConfinesArtifacts: a manifest sent to POST /v1/apply as files
// takes its wasm artifacts from the upload or the world, never from the
// server's disk: a path out of the upload (relative, absolute, through a
// symlink) to a file that exists on the server is refused with a 400 that
// names the file, the def and the path, and says nothing of that file (its
// hash above all), nor of the server's temporary directory; an artifact
// uploaded with another hash is a mismatch, not "not found".
func TestApplyConfinesArtifacts(t *testing.T) {
	s := serveWorld(t, false)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.wasm")
	if err := os.WriteFile(secret, []byte("the server's own bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(secretDir, "link.wasm")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	secretHash := schemas.HashBytes([]byte("the server's own bytes")).String()
	// The upload is written to a directory under the temporary directory:
	// these climb out of it to the secret.
	rel, err := filepath.Rel(filepath.Join(os.TempDir(), "aos-apply-0"), secret)
	if err != nil {
		t.Fatal(err)
	}
	relLink, _ := filepath.Rel(filepath.Join(os.TempDir(), "aos-apply-0"), link)
	declared := schemas.HashBytes([]byte("what the def declares")).String()
	apply := func(artifact string, extra ...api.File) (int, string) {
		defs := fmt.Sprintf(`[
 {"$kind":"defschema","name":"t/S@1","schema":{"type":"object"}},
 {"$kind":"defmodule","name":"t/mod@1","runtime":{"kind":"wasm","artifact":%q,"hash":%q}},
 {"$kind":"defworkflow","name":"t/wf@1","state":"t/S@1","event":"t/S@1","effects_emitted":[],"impl":{"module":"t/mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"t/world","routing":{"subscriptions":[{"event":"t/S@1","workflow":"t/wf@1"}]}}
]`, artifact, declared)
		b, err := json.Marshal(api.ApplyRequest{Files: append([]api.File{{Name: "world.json", Content: []byte(defs)}}, extra...)})
		if err != nil {
			t.Fatal(err)
		}
		return s.do(t, "POST", "/v1/apply", string(b))
	}
	before := s.height(t)
	for _, path := range []string{rel, "../../../../../../../../../.." + secret, secret, relLink, link} {
		code, body := apply(path)
		var e struct{ Error api.Error }
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != 400 || e.Error.Code != api.CodeInvalidManifest {
			t.Fatalf("artifact %q: %d %s", path, code, body)
		}
		for _, want := range []string{"world.json: t/mod@1: /1/runtime/artifact: wasm artifact", strings.ReplaceAll(fmt.Sprintf("%q", path), `"`, `\"`), "was not uploaded", "never read on the server"} {
			if !strings.Contains(body, want) {
				t.Errorf("artifact %q: the answer does not say %q: %s", path, want, body)
			}
		}
		for _, leak := range []string{secretHash, "aos-apply-", "own bytes"} {
			if strings.Contains(body, leak) {
				t.Errorf("artifact %q: the answer reveals %q: %s", path, leak, body)
			}
		}
	}
	// Uploaded under the def's name with other bytes: the mismatch, with
	// both hashes (of bytes the client sent) and no temporary path.
	code, body := apply("build/mod.wasm", artifactFile("something else"))
	if code != 400 || !strings.Contains(body, "has hash "+schemas.HashBytes([]byte("something else")).String()+" but the def declares "+declared) ||
		strings.Contains(body, "not found") || strings.Contains(body, "aos-apply-") {
		t.Fatalf("an uploaded artifact of another hash: %d %s", code, body)
	}
	if after := s.height(t); after != before {
		t.Fatalf("refused applies changed the journal: %d -> %d", before, after)
	}
}
