// Package inspector is the web inspector aosd serves at / on the API's
// listener: a single page of plain JavaScript modules, HTML and CSS embedded
// in the binary with go:embed, and the handler that serves them.
//
// It holds no data and reads none: every number, cell, record and manifest
// the page shows is fetched by the browser from the /v1 API with the bearer
// token the login page took (kept in the tab's sessionStorage, never in a
// URL). So its files and its login page are served without the token, and
// the API's auth is the only gate (api/server.go routes /v1/* and
// /metrics to the API and everything else here).
//
// What it must not do: import the kernel, package api or host, or a storage
// engine; serve anything but its own embedded files; answer a path it does
// not know with the page (unknown paths are 404, so a typo is not a blank
// app).
// Every answer carries a strict Content-Security-Policy (scripts and styles
// from this origin only, no inline script, no eval, fetches to this origin
// only, no framing) and X-Content-Type-Options: nosniff; the scripts render
// all data with textContent, never as HTML. docs/inspector.md describes the
// views and deep links, docs/DECISIONS.md why plain modules and no build step.
package inspector
