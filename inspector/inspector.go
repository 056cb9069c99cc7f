package inspector

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every answer: only this origin's
// scripts, styles and fetches; no inline script or style, no eval, no
// plugins, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// appRoutes are the first path segments the page handles itself (deep
// links): each is answered with index.html, which routes on the path.
var appRoutes = map[string]bool{
	"":         true, // "/"
	"login":    true,
	"status":   true,
	"cells":    true,
	"intents":  true,
	"journal":  true,
	"manifest": true,
	"pending":  true,
}

// Handler serves the inspector: /assets/* from the embedded files, and
// index.html for "/" and every deep link (/cells/{workflow}/{key},
// /intents/{hash}, /journal/{seq}, ...). Only GET and HEAD; other methods
// are 405, unknown paths 404.
func Handler() http.Handler {
	root, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	index, err := fs.ReadFile(root, "index.html")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed (the inspector's pages are read with GET)", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if strings.HasPrefix(p, "/assets/") && path.Clean(p) == p {
			if fi, err := fs.Stat(root, strings.TrimPrefix(p, "/")); err != nil || fi.IsDir() {
				http.NotFound(w, r)
				return
			}
			files.ServeHTTP(w, r)
			return
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if !appRoutes[first] {
			http.Error(w, "404 no such page: "+p+" (the inspector's pages are /, /cells, /pending, /journal, /manifest, /intents; the API is under /v1)", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.Write(index)
	})
}
