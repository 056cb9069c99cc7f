package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The deployment files under deploy/ and the Dockerfile are promises too
// (docs/operations.md): these tests hold them to what aosd accepts. No
// Docker engine runs where the tests run, so `docker build` itself is not
// run: the Dockerfile's build command is, in the repository, and the
// command its image runs is run against the binary it builds.

var repoRoot = filepath.Join("..", "..")

// unitFile reads a systemd unit into section -> key -> values.
func unitFile(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	sec := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			sec = strings.Trim(line, "[]")
			out[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("%s: %q is not KEY=VALUE in a section", path, line)
			}
			out[sec][k] = append(out[sec][k], v)
		}
	}
	return out
}

// serveArgs checks that args run aosd serve with --world and --listen, and
// returns them with the world replaced by world and the address by a free
// loopback port.
func serveArgs(t *testing.T, args []string, world string) []string {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("the command is not `aosd serve`: %q", args)
	}
	out := append([]string(nil), args...)
	seen := map[string]bool{}
	for i := 1; i < len(out)-1; i++ {
		switch out[i] {
		case "--world":
			out[i+1], seen["world"] = world, true
		case "--listen":
			out[i+1], seen["listen"] = "127.0.0.1:0", true
		}
	}
	if !seen["world"] || !seen["listen"] {
		t.Fatalf("the command names no --world or no --listen: %q", args)
	}
	return out
}

// runServe starts bin with args (aosd serve), checks the world it made
// answers the API with its token, runs check while it serves, then stops it
// with sig and requires a clean exit within limit.
func runServe(t *testing.T, bin string, args []string, world string, sig syscall.Signal, limit time.Duration, check func(d *daemon)) {
	t.Helper()
	cmd, addr, errb := launch(t, bin, args, []string{"AOS_WORLD=" + world})
	d := &daemon{cmd: cmd, addr: addr, errb: errb}
	if c := statusWith(t, d, token(t, world)); c != 200 {
		t.Errorf("GET /v1/status with the world's token: %d", c)
	}
	if check != nil {
		check(d)
	}
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%q stopped by %s: %v\n%s", args, sig, err, errb.String())
		}
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%q did not stop within %s of %s", args, limit, sig)
	}
	if _, err := os.Stat(filepath.Join(world, "daemon.json")); !os.IsNotExist(err) {
		t.Errorf("daemon.json left after a clean stop: %v", err)
	}
}

// TestSystemdUnit: deploy/systemd/aosd.service restarts on failure, runs as
// a dedicated user on a world under its StateDirectory, raises the file
// limit, and stops with SIGTERM within TimeoutStopSec; its ExecStart is a
// command aosd accepts (run here with the world and port replaced: it
// creates the world, serves it, re-reads the token on ExecReload's SIGHUP
// and stops cleanly), and `systemd-analyze verify` finds nothing to say.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(repoRoot, "deploy", "systemd", "aosd.service")
	u := unitFile(t, path)
	svc := u["Service"]
	one := func(k string) string {
		t.Helper()
		if len(svc[k]) != 1 {
			t.Fatalf("%s: want one %s=, got %q", path, k, svc[k])
		}
		return svc[k][0]
	}
	if one("Restart") != "on-failure" || one("KillSignal") != "SIGTERM" || one("User") == "root" || one("User") == "" ||
		one("LimitNOFILE") == "" || one("ExecReload") != "/bin/kill -HUP $MAINPID" {
		t.Fatalf("%s: [Service] %v", path, svc)
	}
	stop, err := time.ParseDuration(one("TimeoutStopSec"))
	if err != nil || stop < 30*time.Second {
		t.Fatalf("%s: TimeoutStopSec %q: want at least 30s (the HTTP drain alone may take 10s)", path, one("TimeoutStopSec"))
	}
	start := strings.Fields(one("ExecStart"))
	if start[0] != "/usr/local/bin/aosd" {
		t.Fatalf("%s: ExecStart runs %s", path, start[0])
	}
	state := "/var/lib/" + one("StateDirectory") + "/"
	var world string
	for i, a := range start {
		if a == "--world" && i+1 < len(start) {
			world = start[i+1]
		}
	}
	if !strings.HasPrefix(world, state) || one("Environment") != "AOS_WORLD="+world {
		t.Fatalf("%s: the world %q is not under the StateDirectory %s, or AOS_WORLD differs (%q)", path, world, state, one("Environment"))
	}
	if len(svc["MemoryDenyWriteExecute"]) > 0 {
		t.Fatalf("%s: MemoryDenyWriteExecute stops the wasm runtime from compiling", path)
	}

	w := filepath.Join(t.TempDir(), "world")
	checkJournalAtEnd(t, w)
	runServe(t, aosdBin, serveArgs(t, start[1:], w), w, syscall.SIGTERM, stop, func(d *daemon) {
		// ExecReload: the daemon re-reads the token file and goes on.
		d.cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, "the reload's log line", func() bool { return strings.Contains(d.errb.String(), "token file unchanged") })
		if c := statusWith(t, d, token(t, w)); c != 200 {
			t.Errorf("after ExecReload: %d", c)
		}
	})

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing (Debian's systemd package): CI must verify the unit")
		}
		t.Skip("NO SYSTEMD-ANALYZE: the unit file was not verified (install Debian's systemd)")
	}
	// verify needs ExecStart's binary to exist: the one under test.
	b, _ := os.ReadFile(path)
	copyPath := filepath.Join(t.TempDir(), "aosd.service")
	os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/aosd", aosdBin)), 0o644)
	r := runCmd(t, exec.Command(analyze, "verify", copyPath))
	if r.code != 0 || strings.TrimSpace(r.stderr+r.stdout) != "" {
		t.Fatalf("systemd-analyze verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDockerfile: the Dockerfile builds in two stages and runs aosd as a
// user other than root on a volume; its build command builds aosd from this
// tree (run here as written, in the repository), and the command the image
// runs (ENTRYPOINT and CMD) is one that binary accepts: run here with the
// world and port replaced, it creates the world, serves it with the token,
// its HEALTHCHECK command passes, and its STOPSIGNAL stops it cleanly.
// .dockerignore keeps what the build needs.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(repoRoot, "Dockerfile")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, drop comments.
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(b), "")
	var from, runs []string
	var user, volume, entry, cmd, health, stopsig string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			from = append(from, rest)
			user = "" // per stage
		case "RUN":
			runs = append(runs, rest)
		case "USER":
			user = rest
		case "VOLUME":
			volume = rest
		case "ENTRYPOINT":
			entry = rest
		case "CMD":
			cmd = rest
		case "HEALTHCHECK":
			health = rest
		case "STOPSIGNAL":
			stopsig = rest
		}
	}
	if len(from) < 2 || user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") || volume == "" || stopsig != "SIGTERM" {
		t.Fatalf("%s: stages %q, final USER %q, VOLUME %q, STOPSIGNAL %q: want a multi-stage build running as a user other than root on a volume, stopped by SIGTERM",
			path, from, user, volume, stopsig)
	}
	var build string
	for _, r := range runs {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	if build == "" || !strings.Contains(build, "./cmd/aosd") || !strings.Contains(build, "-o /out/aosd") {
		t.Fatalf("%s: no `go build ... -o /out/aosd ./cmd/aosd` step: %q", path, runs)
	}
	out := t.TempDir()
	sh := exec.Command("sh", "-c", strings.ReplaceAll(build, "/out/aosd", filepath.Join(out, "aosd")))
	sh.Dir = repoRoot
	if r := runCmd(t, sh); r.code != 0 {
		t.Fatalf("the Dockerfile's build step: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bin := filepath.Join(out, "aosd")

	args := append(jsonArray(t, entry), jsonArray(t, cmd)...)
	for len(args) > 0 && args[0] != "/usr/local/bin/aosd" { // tini and its "--"
		args = args[1:]
	}
	if len(args) == 0 {
		t.Fatalf("%s: ENTRYPOINT %s CMD %s never runs /usr/local/bin/aosd", path, entry, cmd)
	}
	w := filepath.Join(t.TempDir(), "world")
	checkJournalAtEnd(t, w)
	hc := jsonArray(t, health[strings.Index(health, "CMD ")+len("CMD "):])
	runServe(t, bin, serveArgs(t, args[1:], w), w, syscall.SIGTERM, 60*time.Second, func(*daemon) {
		if hc[0] != "/usr/local/bin/aosd" {
			t.Fatalf("HEALTHCHECK runs %s", hc[0])
		}
		for i := range hc {
			if hc[i] == "--world" {
				hc[i+1] = w
			}
		}
		if r := runCmd(t, exec.Command(bin, hc[1:]...)); r.code != 0 || !strings.Contains(r.stdout, "via                     daemon at") {
			t.Errorf("HEALTHCHECK %q: exit %d\n%s%s", hc, r.code, r.stdout, r.stderr)
		}
	})

	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Split(string(ignore), "\n") {
		p = strings.TrimPrefix(strings.TrimSpace(p), "/")
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		for _, need := range []string{"go.mod", "go.sum", "cmd", "daemon", "kernel", "inspector", "sdk"} {
			if m, _ := filepath.Match(p, need); m || p == need {
				t.Errorf(".dockerignore pattern %q leaves %s out of the build", p, need)
			}
		}
	}
}

// jsonArray reads a Dockerfile exec-form argument list.
func jsonArray(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &out); err != nil {
		t.Fatalf("not an exec-form list: %q: %v", s, err)
	}
	return out
}
