package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// journaledWithKey counts the journaled events carrying idempotency key k.
func journaledWithKey(t *testing.T, w, k string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", "event")), "\n") {
		var r struct {
			Body struct {
				IdempotencyKey string `json:"idempotency_key"`
			} `json:"body"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		if r.Body.IdempotencyKey == k {
			n++
		}
	}
	return n
}

type sent struct {
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

// postKeyed sends one counter event to the daemon with an Idempotency-Key
// header and returns its answer.
func postKeyed(t *testing.T, w string, d *daemon, key, value string) sent {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+d.addr+"/v1/events",
		strings.NewReader(`{"schema":"`+countEv+`","value":`+value+`}`))
	req.Header.Set("Authorization", "Bearer "+token(t, w))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var s sent
	if resp.StatusCode != 200 || json.Unmarshal(b, &s) != nil || s.Seq == 0 {
		t.Fatalf("post with key %s: %d %s", key, resp.StatusCode, b)
	}
	return s
}

// TestIdempotencyKeySurvivesSIGKILL: a daemon acknowledges an event sent
// with an idempotency key and is killed with SIGKILL; after the restart the
// resend (directly by the CLI, then through a new daemon) gets the same seq
// as a duplicate, and the journal holds the event once.
func TestIdempotencyKeySurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := startKilledDaemon(t, w)
	ok(t, w, "apply", built.Path(t, "counter"))
	const key, value = "retry-me-1", `{"key":"a","by":1}`
	first := postKeyed(t, w, d, key, value)
	if first.Duplicate {
		t.Fatalf("first send answered as a duplicate: %+v", first)
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("daemon did not die by SIGKILL: %v", err)
	}

	var again sent
	jsonOut(t, w, &again, "send", countEv, value, "--idempotency-key", key)
	if again != (sent{Seq: first.Seq, Duplicate: true}) {
		t.Fatalf("resend after SIGKILL: %+v, want seq %d duplicate", again, first.Seq)
	}
	d2 := startDaemon(t, w)
	if got := postKeyed(t, w, d2, key, value); got != again {
		t.Fatalf("resend through a new daemon: %+v, want %+v", got, again)
	}
	if n := journaledWithKey(t, w, key); n != 1 {
		t.Fatalf("%d journaled events carry key %s, want 1", n, key)
	}
	var show struct {
		State map[string]int `json:"state"`
	}
	jsonOut(t, w, &show, "cells", "show", counterWF, "a")
	if show.State["count"] != 1 {
		t.Fatalf("count %d after one event and two resends, want 1", show.State["count"])
	}
}

// TestSendIdempotencyKey: `aosd send --idempotency-key` says whether the
// event was journaled or was a resend, refuses a conflict and an empty key,
// and journals nothing for either.
func TestSendIdempotencyKey(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		out := ok(t, w, "send", countEv, `{"key":"a","by":1}`, "--idempotency-key", "k-1")
		if !strings.Contains(out, "journaled at seq 3") {
			t.Fatalf("first send: %s", out)
		}
		height := getStatus(t, w).JournalHeight
		out = ok(t, w, "send", countEv, `{"key":"a","by":1}`, "--idempotency-key", "k-1")
		if !strings.Contains(out, "already journaled at seq 3 under idempotency key k-1; nothing journaled") {
			t.Fatalf("resend: %s", out)
		}
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"send", countEv, `{"key":"a","by":2}`, "--idempotency-key", "k-1"}, `idempotency key "k-1" was used by the event at seq 3`},
			{[]string{"send", countEv, `{"key":"a","by":1}`, "--idempotency-key", ""}, "--idempotency-key is empty"},
			{[]string{"send", countEv, `{"key":"a","by":1}`, "--idempotency-key", "a b"}, "byte 0x20"},
		} {
			r := aosd(t, w, c.args...)
			if r.code != 1 || !strings.Contains(r.stderr, c.says) {
				t.Errorf("aosd %v: exit %d, stderr %q; want exit 1 saying %q", c.args, r.code, r.stderr, c.says)
			}
		}
		if h := getStatus(t, w).JournalHeight; h != height {
			t.Fatalf("resend and refusals journaled: height %d -> %d", height, h)
		}
	})
}
