//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/internal/tmpfs"
)

// diskFullSize is the tmpfs the world fills: the default reserve
// (badgerdb.DefaultDiskReserve, 52 MiB) and about as much again for the
// manifest's wasm artifact, the journal's tail and the events.
const diskFullSize = 128 << 20

// TestDiskFullStopsTheWorld fills the disk under a real `aosd serve`: its
// world lives on a small tmpfs, and clients send events whose keys are 16
// KiB until the store refuses a write. Without the free-space guard the
// daemon died there of SIGBUS in Badger's value-log write; now
//
//   - the process stays up and every later request (events, status,
//     snapshot) is answered 503 unavailable naming the full disk, and the
//     log has exactly one line naming it;
//   - a snapshot taken 40 MiB above the reserve succeeds, and one taken
//     12 MiB above it, on the nearly full disk, succeeds or stops the world
//     the same way; neither faults;
//   - the daemon stops cleanly, and restarting it while the disk is still
//     full (a ballast file takes what was left) is refused, naming the disk
//     as full, rather than faulting;
//   - once space is freed (the ballast deleted, the tmpfs grown) the world
//     reopens with every acknowledged event at its acknowledged seq, takes
//     events again, and `aosd journal check` and `aosd replay --verify`
//     pass.
//
// It needs root to mount the tmpfs; without it it skips loudly, and fails
// under CI=true.
func TestDiskFullStopsTheWorld(t *testing.T) {
	t.Parallel()
	mnt := tmpfs.Mount(t, diskFullSize)
	w := filepath.Join(mnt, "world")
	ok(t, w, "init")
	checkJournalAtEnd(t, w)
	ok(t, w, "apply", built.Path(t, "counter"))
	d := startDaemon(t, w)
	tok := token(t, w)
	ctx := context.Background()

	// fill sends events until until says stop or a request is refused,
	// and returns the refusals.
	acked := map[uint64]string{} // seq -> key
	var mu sync.Mutex
	fill := func(until func() bool) (refusals []string) {
		var wg sync.WaitGroup
		var rmu sync.Mutex
		for c := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !until(); i++ {
					key := fmt.Sprintf("c%d-%d-%s", c, i, strings.Repeat("k", 16<<10))
					body, _ := json.Marshal(map[string]any{"schema": countEv, "value": map[string]any{"key": key, "by": 1}})
					code, b, err := crashHTTP(ctx, d.addr, tok, "POST", "/v1/events", body)
					if err != nil {
						rmu.Lock()
						refusals = append(refusals, fmt.Sprintf("transport: %v", err))
						rmu.Unlock()
						return
					}
					if code != http.StatusOK {
						rmu.Lock()
						refusals = append(refusals, fmt.Sprintf("%d %s", code, b))
						rmu.Unlock()
						return
					}
					var res struct{ Seq uint64 }
					if err := json.Unmarshal(b, &res); err != nil {
						t.Errorf("event answer %s: %v", b, err)
						return
					}
					mu.Lock()
					acked[res.Seq] = key
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return refusals
	}
	snapshot := func() (code int, body []byte) {
		code, b, err := crashHTTP(ctx, d.addr, tok, "POST", "/v1/snapshot", nil)
		if err != nil {
			t.Fatalf("snapshot at %d bytes free: %v (the daemon died?)\n%s", tmpfs.Free(t, mnt), err, d.errb.String())
		}
		t.Logf("snapshot at %d bytes free: %d", tmpfs.Free(t, mnt), code)
		return code, b
	}
	// A snapshot with room to spare succeeds; one on the nearly full disk
	// succeeds or stops the world; the events after fill the disk.
	stopped := false
	for _, margin := range []int64{40 << 20, 12 << 20} {
		nearly := func() bool {
			free, err := tmpfs.FreeBytes(mnt)
			return err != nil || free < badgerdb.DefaultDiskReserve+margin
		}
		if refusals := fill(nearly); len(refusals) > 0 {
			t.Fatalf("the world stopped %d MiB before the disk was full: %v", margin>>20, refusals)
		}
		switch code, b := snapshot(); {
		case code == http.StatusOK:
		case code == http.StatusServiceUnavailable && margin < 40<<20:
			checkRefusals(t, []string{fmt.Sprintf("%d %s", code, b)})
			stopped = true
		default:
			t.Fatalf("snapshot %d MiB above the reserve: %d %s", margin>>20, code, b)
		}
	}
	if !stopped {
		checkRefusals(t, fill(func() bool { return false }))
	}
	t.Logf("%d events acknowledged, %d bytes free on the tmpfs", len(acked), tmpfs.Free(t, mnt))

	// The process is alive; every request is refused, naming the cause.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/events", `{"schema":"` + countEv + `","value":{"key":"late","by":1}}`},
		{"GET", "/v1/status", ""},
		{"POST", "/v1/snapshot", ""},
	} {
		code, b, err := crashHTTP(ctx, d.addr, tok, r.method, r.path, []byte(r.body))
		if err != nil {
			t.Fatalf("%s %s after the disk filled: %v (the daemon died?)\n%s", r.method, r.path, err, d.errb.String())
		}
		checkRefusals(t, []string{fmt.Sprintf("%d %s", code, b)})
	}
	if n := strings.Count(d.errb.String(), "disk full"); n != 1 {
		t.Fatalf("the log names the full disk on %d lines, want exactly 1:\n%s", n, d.errb.String())
	}
	d.stop(t, w)

	// Still full: a restart is refused before the store writes anything.
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, max(tmpfs.Free(t, mnt)-64<<10, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := aosd(t, w, "serve", "--listen", "127.0.0.1:0"); r.code != 1 || !strings.Contains(r.stderr, "disk full") || !strings.Contains(r.stderr, mnt) {
		t.Fatalf("serve on a full disk: exit %d, want 1 naming the full disk at %s\n%s%s", r.code, mnt, r.stdout, r.stderr)
	}

	// Space freed: everything acknowledged is there, and the world goes on.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	tmpfs.Resize(t, mnt, 2*diskFullSize)
	d = startDaemon(t, w)
	got := map[uint64]string{}
	for _, line := range strings.Split(strings.TrimSpace(ok(t, w, "journal", "--kind", "event", "--json")), "\n") {
		var rec struct {
			Seq  uint64
			Body struct {
				Value struct{ Key string }
			}
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		got[rec.Seq] = rec.Body.Value.Key
	}
	for seq, key := range acked {
		if got[seq] != key {
			t.Fatalf("acknowledged event at seq %d (key %.12s…) is %q after the restart", seq, key, got[seq])
		}
	}
	ok(t, w, "send", countEv, `{"key":"after","by":1}`)
	d.stop(t, w)
	if out := ok(t, w, "replay", "--verify"); !strings.Contains(out, "ok") {
		t.Fatalf("replay --verify:\n%s", out)
	}
}

// checkRefusals holds each refusal (status and body, or a transport
// error) to a 503 unavailable whose message names the full disk.
func checkRefusals(t *testing.T, refusals []string) {
	t.Helper()
	if len(refusals) == 0 {
		t.Fatal("the disk never filled: no request was refused")
	}
	for _, r := range refusals {
		if !strings.HasPrefix(r, "503 ") || !strings.Contains(r, `"unavailable"`) || !strings.Contains(r, "disk full") {
			t.Fatalf("refusal %s, want 503 unavailable naming the full disk", r)
		}
	}
}
