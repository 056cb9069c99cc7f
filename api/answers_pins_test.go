package api_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/receipts"
)

// probePins provokes, on a world of its own, the answers of live manifests
// and pins: an apply --pin while job j1 waits on its intent pins j1 to the
// first manifest; a poke for j1 (a schema only the new manifest has) is
// refused 409 pinned, journaling nothing; the first manifest cannot be
// retired until j1's receipt settles it, and the current one never.
func probePins(t *testing.T, manifest string, start func(string) string) {
	aw := newAnswersWorld(t)
	pinned := strings.NewReplacer(
		`"variant":{"Start":"t/Start@1","Receipt"`, `"variant":{"Start":"t/Start@1","Poke":"t/Poke@1","Receipt"`,
		`{"event":"t/Start@1","workflow":"t/job@1","key_field":"id"}`, `{"event":"t/Start@1","workflow":"t/job@1","key_field":"id"},{"event":"t/Poke@1","workflow":"t/job@1","key_field":"id"}`,
		` {"$kind":"manifest","name":"t/answers"`, ` {"$kind":"defschema","name":"t/Poke@1","schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}},
 {"$kind":"manifest","name":"t/answers-pinned"`).Replace(manifest)
	if pinned == manifest {
		t.Fatal("the pinned manifest is the first one")
	}
	files := func(m string, pin bool) string {
		b, _ := json.Marshal(map[string]any{"files": []map[string]any{{"name": "manifest.json", "content": json.RawMessage(m)}}, "pin": pin})
		return string(b)
	}
	payments, _ := receipts.GenerateKey()
	key, _ := json.Marshal(api.AddKeyRequest{Name: "payments", PublicKey: pubPEM(t, payments.Public().(ed25519.PublicKey)), Effects: []string{workFx}})
	for _, p := range []probe{
		{name: "apply", route: "POST /v1/apply", path: "/v1/apply", body: files(manifest, false), status: 200, journals: true},
		{name: "add key", route: "POST /v1/keys", path: "/v1/keys", body: string(key), status: 200},
		{name: "job j1", route: "POST /v1/events", path: "/v1/events", body: start("j1"), status: 200, journals: true},
		{name: "manifests, one", route: "GET /v1/manifests", path: "/v1/manifests", status: 200, says: `"current":true`},
		{name: "apply, pinned", route: "POST /v1/apply", path: "/v1/apply", body: files(pinned, true), status: 200, journals: true, says: `"pinned_now":1`},
	} {
		aw.run(t, p)
	}
	aw.run(t, probe{name: "status, pinned", route: "GET /v1/status", path: "/v1/status", status: 200, says: `"pinned":[{"hash":`})
	var page api.ManifestsPage
	if err := json.Unmarshal([]byte(aw.run(t, probe{name: "manifests, two", route: "GET /v1/manifests", path: "/v1/manifests", status: 200,
		says: `"waiting":1`}).body), &page); err != nil || len(page.Manifests) != 2 {
		t.Fatalf("manifests: %+v, %v", page, err)
	}
	old, cur := page.Manifests[0].Hash, page.Manifests[1].Hash
	retire := func(h string) string { return "/v1/manifests/" + h + "/retire" }
	pinnedTo := func(h string) string { return "/v1/cells/t%2Fjob@1?pin=" + h }
	poke := `{"schema":"t/Poke@1","value":{"id":"j1"}}`
	for _, p := range []probe{
		{name: "poke a pinned job", route: "POST /v1/events", path: "/v1/events", body: poke, status: 409, code: "pinned", says: "pinned to manifest t/answers"},
		{name: "poke a new job", route: "POST /v1/events", path: "/v1/events", body: `{"schema":"t/Poke@1","value":{"id":"j9"}}`, status: 200, journals: true},
		// The pin filter lists the instances pinned to a manifest: j1 on
		// the old one, nothing on the current one (j9 is on it, unpinned).
		{name: "cells pinned to the old manifest", route: "GET /v1/cells/{workflow}", path: pinnedTo(old), status: 200, says: `"key":"j1","state_hash":`},
		{name: "cells pinned to the old manifest, j1", route: "GET /v1/cells/{workflow}", path: pinnedTo(old) + "&key=j1&status=waiting", status: 200, says: `"pin":"` + old + `"`},
		{name: "cells pinned to the old manifest, completed", route: "GET /v1/cells/{workflow}", path: pinnedTo(old) + "&status=completed", status: 200, says: `{"cells":[]}`},
		// j2's key hash sorts before j1's: the page after it holds j1, not j2.
		{name: "cells pinned to the old manifest, key j2", route: "GET /v1/cells/{workflow}", path: pinnedTo(old) + "&key=j2", status: 200, says: `{"cells":[]}`},
		{name: "cells pinned to the old manifest, key j9", route: "GET /v1/cells/{workflow}", path: pinnedTo(old) + "&key=j9", status: 200, says: `{"cells":[]}`},
		{name: "cells pinned to the current manifest", route: "GET /v1/cells/{workflow}", path: pinnedTo(cur), status: 200, says: `{"cells":[]}`},
		{name: "cells pinned, not a hash", route: "GET /v1/cells/{workflow}", path: pinnedTo("nope"), status: 400, code: "invalid_input", says: `"where":"pin"`},
		{name: "cells pinned, empty", route: "GET /v1/cells/{workflow}", path: pinnedTo(""), status: 400, code: "invalid_input", says: `"where":"pin"`},
		{name: "retire, not drained", route: "POST /v1/manifests/{hash}/retire", path: retire(old), status: 409, code: "not_drained", says: `t/job@1 key \"j1\" (waiting)`},
		{name: "retire the current", route: "POST /v1/manifests/{hash}/retire", path: retire(cur), status: 409, code: "current_manifest"},
		{name: "retire, not a hash", route: "POST /v1/manifests/{hash}/retire", path: retire("nope"), status: 400, code: "invalid_input"},
		{name: "receipt under the pin", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, aw.intentOf(t, "j1"), map[string]any{"ok": true}), status: 200, journals: true},
		{name: "manifests, drained", route: "GET /v1/manifests", path: "/v1/manifests", status: 200, says: `"drained":true`},
		{name: "cells pinned to the drained manifest", route: "GET /v1/cells/{workflow}", path: pinnedTo(old), status: 200, says: `{"cells":[]}`},
		{name: "retire by a prefix", route: "POST /v1/manifests/{hash}/retire", path: retire(old[:len("sha256:")+8]), status: 200, journals: true, says: `"hash":"` + old + `"`},
		{name: "retire again", route: "POST /v1/manifests/{hash}/retire", path: retire(old), status: 404, code: "not_found"},
		{name: "retire again by a prefix", route: "POST /v1/manifests/{hash}/retire", path: retire(old[len("sha256:") : len("sha256:")+9]), status: 404, code: "not_found", says: "no live manifest hash starts with"},
	} {
		aw.run(t, p)
	}
}
