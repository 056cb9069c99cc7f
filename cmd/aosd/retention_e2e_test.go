package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// TestJournalReadersAfterRetention: once `aosd gc --drop-journal` dropped
// the journal's oldest records, every reader of old records answers (it
// was a 500, or exit 1, for the journal listing, the trace and journal
// verify): the listing from the start begins at the first record held and
// says so on stderr, a listing from a dropped seq is refused naming the
// first seq held, traces show what is left, and verify checks it, saying
// where it started; over HTTP, the journal answers carry Aos-Journal-First,
// a read from a dropped seq is 410 truncated, and a follower from the start
// begins at the first record held. Directly and through a daemon.
func TestJournalReadersAfterRetention(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		for _, k := range []string{"a", "b"} {
			ok(t, w, "send", countEv, `{"key":"`+k+`","by":1}`)
		}
		ok(t, w, "snapshot")
		ok(t, w, "send", countEv, `{"key":"c","by":1}`)
		ok(t, w, "snapshot")
		ok(t, w, "send", countEv, `{"key":"d","by":1}`)
		var gc struct {
			Journal struct {
				Records int    `json:"records"`
				First   uint64 `json:"first"`
			} `json:"journal"`
		}
		jsonOut(t, w, &gc, "gc", "--keep-snapshots", "1", "--drop-journal")
		first := gc.Journal.First
		if gc.Journal.Records == 0 || first < 3 {
			t.Fatalf("gc --drop-journal dropped %d records, first %d: nothing to read past", gc.Journal.Records, first)
		}
		var st struct {
			First uint64 `json:"journal_first"`
		}
		jsonOut(t, w, &st, "status")
		if st.First != first {
			t.Fatalf("status journal_first %d, want %d", st.First, first)
		}
		if out := ok(t, w, "status"); !strings.Contains(out, fmt.Sprintf("%d (retention dropped the records before it)", first)) {
			t.Fatalf("status table does not show the journal's first seq %d:\n%s", first, out)
		}
		says := fmt.Sprintf("the journal starts at seq %d", first)

		// The listing from the start.
		r := aosd(t, w, "journal", "--json")
		if r.code != 0 || !strings.Contains(r.stderr, says) {
			t.Fatalf("journal after retention: exit %d, stderr %q (want it to say %q)\n%s", r.code, r.stderr, says, r.stdout)
		}
		var line struct{ Seq uint64 }
		if err := json.Unmarshal([]byte(firstLine(r.stdout)), &line); err != nil || line.Seq != first {
			t.Fatalf("journal after retention starts at %d (%v), want %d", line.Seq, err, first)
		}
		// From a dropped seq: refused, naming the first seq held.
		r = aosd(t, w, "journal", "--from", "2")
		if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("starts at seq %d", first)) || strings.Contains(r.stdout, "\n2 ") {
			t.Fatalf("journal --from 2 after retention: exit %d, want 1 naming seq %d\n%s%s", r.code, first, r.stdout, r.stderr)
		}
		if out := ok(t, w, "journal", "--from", strconv.FormatUint(first, 10), "--json"); !strings.Contains(firstLine(out), fmt.Sprintf(`"seq":%d}`, first)) {
			t.Fatalf("journal --from %d:\n%s", first, out)
		}

		// Traces show what is left; verify checks it.
		ok(t, w, "trace", counterWF, "a")
		var tr []struct{ Seq uint64 }
		jsonOut(t, w, &tr, "trace", counterWF, "d")
		if len(tr) == 0 || tr[0].Seq < first {
			t.Fatalf("trace of d after retention: %+v, want entries from seq %d on", tr, first)
		}
		if out := ok(t, w, "journal", "verify"); !strings.Contains(out, says) || !strings.HasSuffix(strings.TrimSpace(out), ": ok") {
			t.Fatalf("journal verify after retention:\n%s", out)
		}
		var vr struct {
			First uint64 `json:"first"`
			OK    bool   `json:"ok"`
		}
		jsonOut(t, w, &vr, "journal", "verify")
		if vr.First != first || !vr.OK {
			t.Fatalf("journal verify --json after retention: %+v, want first %d and ok", vr, first)
		}

		if d == nil {
			return
		}
		// Over HTTP: the header, the 410, and a follower from the start.
		tok := token(t, w)
		code, body, err := crashHTTP(context.Background(), d.addr, tok, "GET", "/v1/journal?from=2", nil)
		if err != nil || code != http.StatusGone || !strings.Contains(string(body), `"truncated"`) {
			t.Fatalf("GET /v1/journal?from=2 after retention: %d %s %v, want 410 truncated", code, body, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/v1/journal?follow=true", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Aos-Journal-First") != strconv.FormatUint(first, 10) {
			t.Fatalf("follow after retention: %d, Aos-Journal-First %q, want 200 and %d", resp.StatusCode, resp.Header.Get("Aos-Journal-First"), first)
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() {
			t.Fatalf("follow after retention: no first line (%v)", sc.Err())
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Seq != first {
			t.Fatalf("follow after retention starts at %d (%v: %s), want %d", line.Seq, err, sc.Bytes(), first)
		}
	})
}
