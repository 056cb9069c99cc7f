package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// promtoolPath finds Debian's promtool (package prometheus), or skips
// loudly (fails under CI=true, where .ci/run installs it).
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("promtool is missing: CI must check the Prometheus config (apt-get install prometheus)")
	}
	t.Skip("NO PROMTOOL: deploy/prometheus was not checked (apt-get install prometheus)")
	return ""
}

// metricNames lists the metric names text mentions that aosd would export:
// aos_*, process_* and go_* (histogram series suffixes stripped).
func metricNames(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range regexp.MustCompile(`\b(?:aos|process|go)_[a-z0-9_]+`).FindAllString(text, -1) {
		m = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// promQuery asks Prometheus for an instant vector and returns its first
// value ("" when the result is empty).
func promQuery(t *testing.T, base, q string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Data.Result) == 0 {
		return ""
	}
	s, _ := out.Data.Result[0].Value[1].(string)
	return s
}

// TestPrometheusConfig: deploy/prometheus passes promtool (the config, the
// rules, and the rules' own unit tests); every metric the rules and
// docs/operations.md name is one a daemon's /metrics exports; and a real
// Prometheus scraping a real daemon with the config (the token read from
// the world's file) sees its journal height, before and after `aosd token
// rotate`.
func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	promtool := promtoolPath(t)
	dir := filepath.Join(repoRoot, "deploy", "prometheus")
	rules, err := os.ReadFile(filepath.Join(dir, "aos-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	test := exec.Command(promtool, "test", "rules", "aos-alerts_test.yml")
	test.Dir = dir
	if r := runCmd(t, test); r.code != 0 {
		t.Fatalf("promtool test rules: %s%s", r.stdout, r.stderr)
	}

	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, "counter"))
	d := startDaemon(t, w)
	ok(t, w, "send", countEv, `{"key":"a","by":1}`)
	ok(t, w, "snapshot")

	// The config, pointed at this daemon and its world's token.
	b, err := os.ReadFile(filepath.Join(dir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	conf := string(b)
	for old, repl := range map[string]string{
		"/var/lib/aos/world/token": filepath.Join(w, "token"),
		`"127.0.0.1:7878"`:         `"` + d.addr + `"`,
		"scrape_interval: 15s":     "scrape_interval: 1s",
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("deploy/prometheus/prometheus.yml no longer says %q", old)
		}
		conf = strings.ReplaceAll(conf, old, repl)
	}
	os.WriteFile(filepath.Join(tmp, "prometheus.yml"), []byte(conf), 0o644)
	os.WriteFile(filepath.Join(tmp, "aos-alerts.yml"), rules, 0o644)
	if r := runCmd(t, exec.Command(promtool, "check", "config", filepath.Join(tmp, "prometheus.yml"))); r.code != 0 {
		t.Fatalf("promtool check config: %s%s", r.stdout, r.stderr)
	}

	// Every metric named is exported.
	exported := metricsText(t, d, w)
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"aos-alerts.yml": string(rules), "docs/operations.md": string(doc)} {
		names := metricNames(text)
		if len(names) == 0 {
			t.Fatalf("%s names no metric", what)
		}
		for _, n := range names {
			if !strings.Contains(exported, "\n# TYPE "+n+" ") {
				t.Errorf("%s names %s, which /metrics does not export", what, n)
			}
		}
	}

	// A real Prometheus scrapes the daemon with it.
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is missing: CI must scrape a daemon with the config")
		}
		t.Skip("NO PROMETHEUS: the config was not run against a daemon (apt-get install prometheus)")
	}
	listen := freePort(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(tmp, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(tmp, "data"),
		"--web.listen-address="+listen)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	base := "http://" + listen
	sees := func(h uint64) func() bool {
		return func() bool {
			return promQuery(t, base, `aos_journal_height{job="aos"}`) == fmt.Sprint(h) && promQuery(t, base, `up{job="aos"}`) == "1"
		}
	}
	waitFor(t, "Prometheus to scrape the journal height", sees(getStatus(t, w).JournalHeight))
	ok(t, w, "token", "rotate")
	ok(t, w, "send", countEv, `{"key":"a","by":1}`)
	waitFor(t, "Prometheus to scrape with the rotated token", sees(getStatus(t, w).JournalHeight))
	if t.Failed() {
		t.Log(logs.String())
	}
}
