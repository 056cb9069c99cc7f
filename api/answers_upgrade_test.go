package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// probeUpgrade provokes, on a world of its own, the answers of
// POST /v1/upgrade and POST /v1/replay/manifest: job j1 waits on its
// intent when an apply with pin makes a manifest current that runs the
// same code under another name; the offline check says j1 could move; a
// dry run moves nothing; the upgrade journals j1's move; again, j1 is not
// pinned any more.
func probeUpgrade(t *testing.T, manifest string, start func(string) string) {
	aw := newAnswersWorld(t)
	renamed := strings.Replace(manifest, `{"$kind":"manifest","name":"t/answers"`, `{"$kind":"manifest","name":"t/answers-2"`, 1)
	if renamed == manifest {
		t.Fatal("the renamed manifest is the first one")
	}
	files := func(m string, pin bool) string {
		b, _ := json.Marshal(map[string]any{"files": []map[string]any{{"name": "manifest.json", "content": json.RawMessage(m)}}, "pin": pin})
		return string(b)
	}
	check := func(m string) string {
		b, _ := json.Marshal(map[string]any{"files": []map[string]any{{"name": "manifest.json", "content": json.RawMessage(m)}}})
		return string(b)
	}
	for _, p := range []probe{
		{name: "upgrade before apply", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1","all":true}`, status: 409, code: "no_manifest"},
		{name: "apply", route: "POST /v1/apply", path: "/v1/apply", body: files(manifest, false), status: 200, journals: true},
		{name: "job j1", route: "POST /v1/events", path: "/v1/events", body: start("j1"), status: 200, journals: true},
		{name: "apply, pinned", route: "POST /v1/apply", path: "/v1/apply", body: files(renamed, true), status: 200, journals: true, says: `"pinned_now":1`},
		{name: "replay under a manifest", route: "POST /v1/replay/manifest", path: "/v1/replay/manifest", body: check(renamed), status: 200, says: `"would_move":1`},
		{name: "replay under no manifest", route: "POST /v1/replay/manifest", path: "/v1/replay/manifest", body: `{}`, status: 400, code: "invalid_input"},
		{name: "replay under a bad manifest", route: "POST /v1/replay/manifest", path: "/v1/replay/manifest", body: check(`[{"$kind":"defschema","name":"x"}]`), status: 400, code: "invalid_manifest"},
		{name: "replay under too large", route: "POST /v1/replay/manifest", path: "/v1/replay/manifest", body: strings.Repeat(" ", 64<<20+1), status: 413, code: "too_large"},
		{name: "upgrade, no workflow", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"all":true}`, status: 400, code: "invalid_input"},
		{name: "upgrade, unknown workflow", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/nope@1","all":true}`, status: 400, code: "invalid_input", says: "not in the current manifest"},
		{name: "upgrade, no keys", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1"}`, status: 400, code: "invalid_input", says: "name the keys"},
		{name: "upgrade, bad key", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1","keys":[""]}`, status: 400, code: "invalid_input"},
		{name: "upgrade too large", route: "POST /v1/upgrade", path: "/v1/upgrade", body: strings.Repeat(" ", 8<<20+1), status: 413, code: "too_large"},
		{name: "upgrade, dry run", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1","all":true,"dry_run":true}`, status: 200, says: `"outcome":"would_move"`},
		{name: "upgrade", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1","keys":["j1","j9"]}`, status: 200, journals: true, says: `"outcome":"moved"`},
		{name: "upgrade again", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1","keys":["j1"]}`, status: 200, says: `"outcome":"not_pinned"`},
	} {
		aw.run(t, p)
	}
}
