package inspector_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/inspector"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestServesPageAndDeepLinks: "/" and every deep link answer index.html;
// assets answer with their type; unknown paths, directories and other
// methods do not get the page.
func TestServesPageAndDeepLinks(t *testing.T) {
	h := inspector.Handler()
	for _, p := range []string{"/", "/login", "/status", "/cells", "/cells/com.example%2Forder.step@1",
		"/cells/com.example%2Forder.step@1/%22o-1%22", "/intents/sha256:00", "/journal", "/journal/42", "/manifest", "/pending", "/pending?effect=sys%2Ftimer.set%401"} {
		resp, body := get(t, h, "GET", p)
		if resp.StatusCode != 200 || !strings.Contains(body, `<script type="module" src="/assets/app.js">`) {
			t.Errorf("GET %s: %d, want index.html\n%s", p, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
	}
	for p, ct := range map[string]string{"/assets/app.js": "text/javascript; charset=utf-8", "/assets/style.css": "text/css; charset=utf-8",
		"/assets/views/cell.js": "text/javascript; charset=utf-8"} {
		resp, body := get(t, h, "GET", p)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct || len(body) == 0 {
			t.Errorf("GET %s: %d %q (%d bytes), want 200 %s", p, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ct)
		}
	}
	for _, p := range []string{"/nothing", "/favicon.ico", "/assets/", "/assets/views", "/assets/nope.js", "/index.html", "/assets/../index.html"} {
		if resp, body := get(t, h, "GET", p); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404\n%s", p, resp.StatusCode, body)
		}
	}
	resp, _ := get(t, h, "POST", "/")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d Allow %q, want 405 GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestSecurityHeaders: every answer, page, asset or 404, carries the strict
// CSP and nosniff.
func TestSecurityHeaders(t *testing.T) {
	h := inspector.Handler()
	for _, p := range []string{"/", "/cells/x", "/assets/app.js", "/nothing"} {
		resp, _ := get(t, h, "GET", p)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows unsafe sources", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", p)
		}
	}
}

// TestAssetsRenderDataAsText holds the sources to what the package
// promises: no inline script or style in the page, and no API that parses
// a string as HTML or code in the scripts.
func TestAssetsRenderDataAsText(t *testing.T) {
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('style'|javascript:`)
	n := 0
	err := filepath.WalkDir("static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		src := string(b)
		switch filepath.Ext(p) {
		case ".js":
			n++
			if m := banned.FindString(src); m != "" {
				t.Errorf("%s uses %s: render data with textContent (dom.js h), never as HTML", p, m)
			}
		case ".html":
			for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(src, -1) {
				if !strings.Contains(tag, " src=") {
					t.Errorf("%s has an inline script %s: the CSP refuses it", p, tag)
				}
			}
			if regexp.MustCompile(`\sstyle=|<style|\son[a-z]+=`).MatchString(src) {
				t.Errorf("%s has an inline style or handler: the CSP refuses it", p)
			}
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("walk static: %v (%d scripts)", err, n)
	}
}
