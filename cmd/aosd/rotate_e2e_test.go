package main_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/receipts"
)

// statusWith is GET /v1/status's HTTP status with a bearer token.
func statusWith(t *testing.T, d *daemon, tok string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type rotation struct {
	Token         string  `json:"token"`
	File          string  `json:"file"`
	GraceMs       int64   `json:"grace_ms"`
	OldValidUntil *string `json:"old_valid_until"`
	Daemon        bool    `json:"daemon"`
}

// TestTokenRotate: `aosd token rotate` through a running daemon writes a
// fresh token file that the daemon accepts at once; with --grace it goes on
// accepting the old token, and the next rotation without a grace refuses
// every earlier one. SIGHUP makes the daemon take a token file replaced by
// hand, and keeps the token it had when the file holds none. Without a
// daemon the file is rewritten and the next daemon takes it. Nothing is
// journaled, and the daemon never restarts.
func TestTokenRotate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := startDaemon(t, w)
	pid := d.cmd.Process.Pid
	h0 := getStatus(t, w).JournalHeight
	t0 := token(t, w)

	var r rotation
	jsonOut(t, w, &r, "token", "rotate", "--grace", "1h")
	t1 := token(t, w)
	if !r.Daemon || r.GraceMs != 3_600_000 || r.OldValidUntil == nil || r.Token != "" || t1 == t0 || len(t1) != 64 {
		t.Fatalf("rotate --grace 1h: %+v (token %q, was %q)", r, t1, t0)
	}
	if got := [2]int{statusWith(t, d, t0), statusWith(t, d, t1)}; got != [2]int{200, 200} {
		t.Fatalf("within the grace: old %d, new %d; want both 200", got[0], got[1])
	}
	if st, err := os.Stat(filepath.Join(w, "token")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st.Mode(), err)
	}
	out := ok(t, w, "token", "rotate")
	t2 := token(t, w)
	if !strings.Contains(out, "the old one is refused from now on") {
		t.Fatalf("rotate: %s", out)
	}
	if got := [3]int{statusWith(t, d, t0), statusWith(t, d, t1), statusWith(t, d, t2)}; got != [3]int{401, 401, 200} {
		t.Fatalf("after a rotation without grace: tokens answered %v, want [401 401 200]", got)
	}
	// The CLI reads the file: it still goes through the daemon.
	if !strings.Contains(ok(t, w, "status"), "daemon at http://"+d.addr) {
		t.Fatal("status after rotation did not go through the daemon")
	}

	// A token file replaced by hand, then SIGHUP.
	const handmade = "handmade-0123456789"
	if err := os.WriteFile(filepath.Join(w, "token"), []byte(handmade+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the daemon to take the new token file", func() bool { return statusWith(t, d, handmade) == 200 })
	if c := statusWith(t, d, t2); c != 401 {
		t.Fatalf("the token before the reload: %d, want 401", c)
	}
	// An empty file: the daemon keeps the token it has. A reload that
	// took it would log "token reloaded" once more: that fails at once
	// rather than after waitFor's minute.
	// (The daemon logs the reload just after it takes the token, so the
	// line is waited for before the next reload.)
	waitFor(t, "the reload's log line", func() bool { return strings.Contains(d.errb.String(), "token reloaded") })
	reloads := strings.Count(d.errb.String(), "token reloaded")
	os.WriteFile(filepath.Join(w, "token"), []byte("\n"), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the refused reload's log line", func() bool {
		if strings.Count(d.errb.String(), "token reloaded") > reloads {
			t.Fatalf("the daemon reloaded an empty token file:\n%s", d.errb.String())
		}
		return strings.Contains(d.errb.String(), "token not reloaded; the API keeps accepting the token it had")
	})
	if c := statusWith(t, d, handmade); c != 200 {
		t.Fatalf("after a reload of an empty file the token it had answers %d", c)
	}
	if d.cmd.Process.Pid != pid || d.cmd.ProcessState != nil {
		t.Fatal("the daemon restarted")
	}
	os.WriteFile(filepath.Join(w, "token"), []byte(handmade+"\n"), 0o600)
	if r := aosd(t, w, "token", "rotate", "--grace", "25h"); r.code != 2 {
		t.Fatalf("--grace 25h: exit %d", r.code)
	}
	d.stop(t, w)

	// Without a daemon: the file changes, the next daemon takes it.
	jsonOut(t, w, &r, "token", "rotate")
	t3 := token(t, w)
	if r.Daemon || t3 == handmade {
		t.Fatalf("rotate without a daemon: %+v", r)
	}
	d = startDaemon(t, w)
	if got := [2]int{statusWith(t, d, handmade), statusWith(t, d, t3)}; got != [2]int{401, 200} {
		t.Fatalf("a new daemon: old %d, new %d", got[0], got[1])
	}
	if h := getStatus(t, w).JournalHeight; h != h0 {
		t.Fatalf("rotations journaled: height %d -> %d", h0, h)
	}
}

// TestExecutorKeyRotation: an external executor's key is replaced on a
// serving world without a restart, as docs/operations.md says: the new key
// is added under the same executor name, the executor switches to it, the
// old key is removed; receipts signed with the new key settle from the
// moment it is added, the old key's are refused (403, nothing journaled)
// once it is removed, and the journal's receipts signed with the old key
// still verify against a keys file kept from before the removal.
func TestExecutorKeyRotation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := startDaemon(t, w)
	tok := token(t, w)
	oldKey, oldPub := newExecutorKey(t)
	newKey, newPub := newExecutorKey(t)
	ok(t, w, "keys", "add", "payments", oldPub, "--effects", chargeEffect)
	ok(t, w, "apply", built.Path(t, "orders"))
	order := func(id string) claimedCharge {
		t.Helper()
		ok(t, w, "send", "com.example/OrderCreated@1", `{"order_id":"`+id+`","amount_cents":100,"customer":"c"}`)
		return claimCharges(t, d, tok, id)[id]
	}
	status := func(id string) string {
		t.Helper()
		var cell struct{ State map[string]any }
		jsonOut(t, w, &cell, "cells", "show", orderWF, id)
		s, _ := cell.State["status"].(string)
		return s
	}
	settleCharge(t, d, tok, oldKey, order("o1"), "succeeded")

	ok(t, w, "keys", "add", "payments", newPub, "--effects", chargeEffect) // 1. add the new key
	settleCharge(t, d, tok, newKey, order("o2"), "succeeded")              // 2. the executor switches
	settleCharge(t, d, tok, oldKey, order("o3"), "succeeded")              //    (the old key still settles meanwhile)
	keysFile := filepath.Join(t.TempDir(), "keys-before.json")
	os.WriteFile(keysFile, []byte(ok(t, w, "keys", "ls", "--json")), 0o600) // kept for verifying old receipts

	oldID := receipts.KeyID(oldKey.Public().(ed25519.PublicKey))
	ok(t, w, "keys", "rm", oldID) // 3. remove the old key
	o4 := order("o4")
	before := getStatus(t, w).JournalHeight
	if code, body := post(t, d, tok, "/v1/receipts", chargeReceipt(t, oldKey, o4, "succeeded")); code != 403 || !strings.Contains(string(body), "untrusted") {
		t.Fatalf("a receipt signed with the removed key: %d %s", code, body)
	}
	if after := getStatus(t, w).JournalHeight; after != before {
		t.Fatalf("the refused receipt journaled: %d -> %d", before, after)
	}
	settleCharge(t, d, tok, newKey, o4, "succeeded")
	for _, id := range []string{"o1", "o2", "o3", "o4"} {
		if s := status(id); s != "paid" {
			t.Errorf("order %s: %s, want paid", id, s)
		}
	}
	var keys []struct{ Name, ID string }
	jsonOut(t, w, &keys, "keys", "ls")
	if len(keys) != 2 || strings.Contains(ok(t, w, "keys", "ls"), oldID) {
		t.Fatalf("keys after the rotation: %+v", keys)
	}
	// The old key's receipts fail verification against today's keys, and
	// pass against the keys kept from before the removal.
	var ver struct {
		OK       bool `json:"ok"`
		Failures []struct {
			Reason string `json:"reason"`
		} `json:"failures"`
	}
	r := aosd(t, w, "journal", "verify", "--json")
	if json.Unmarshal([]byte(r.stdout), &ver) != nil || r.code != 1 || ver.OK || len(ver.Failures) != 2 ||
		!strings.Contains(ver.Failures[0].Reason, "not trusted") {
		t.Fatalf("journal verify against today's keys: exit %d %s", r.code, r.stdout)
	}
	export := filepath.Join(t.TempDir(), "export.ndjson")
	os.WriteFile(export, []byte(ok(t, w, "journal", "--json")), 0o600)
	jsonOut(t, w, &ver, "journal", "verify", "--file", export, "--keys", keysFile)
	if !ver.OK {
		t.Fatalf("journal verify with the kept keys: %+v", ver)
	}
	// The daemon was never restarted, and the file keeps the change.
	if d.cmd.ProcessState != nil {
		t.Fatal("the daemon stopped")
	}
	d.stop(t, w)
	if strings.Contains(ok(t, w, "keys", "ls"), oldID) {
		t.Fatal("the removed key is back after a restart")
	}
}
