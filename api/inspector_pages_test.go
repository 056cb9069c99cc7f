package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestInspectorBesideAPI: the inspector's pages answer without the token
// (they hold no data), while /v1 (unknown routes there included) and
// /metrics still need it, and an unknown /v1 route keeps the API's JSON 404.
func TestInspectorBesideAPI(t *testing.T) {
	s := serveWorld(t, false)
	anon := func(path string) (int, http.Header, string) {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, p := range []string{"/", "/cells/com.example%2Forder.step@1/%22o-1%22", "/journal/3", "/assets/app.js"} {
		code, h, body := anon(p)
		if code != 200 || h.Get("Content-Security-Policy") == "" || len(body) == 0 {
			t.Errorf("GET %s without a token: %d (CSP %q), want the inspector's file", p, code, h.Get("Content-Security-Policy"))
		}
	}
	for _, p := range []string{"/v1", "/v1/status", "/v1/nothing", "/v1/cells/x", "/metrics"} {
		if code, _, body := anon(p); code != 401 || !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("GET %s without a token: %d %s, want 401 unauthorized", p, code, body)
		}
	}
	if code, body := s.do(t, "GET", "/v1/nothing", ""); code != 404 || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("GET /v1/nothing with the token: %d %s, want the API's JSON 404", code, body)
	}
	if code, _, body := anon("/nothing"); code != 404 || strings.Contains(body, "{") {
		t.Errorf("GET /nothing: %d %s, want the inspector's 404", code, body)
	}
}
