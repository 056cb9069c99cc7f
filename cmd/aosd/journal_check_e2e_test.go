package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// TestJournalCheckCommand: `aosd journal check` passes a world's journal,
// directly and through a daemon, in text and JSON; after retention cut the
// journal, it starts from the kept snapshot; arguments it does not take
// are usage errors.
func TestJournalCheckCommand(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		for _, k := range []string{"a", "b", "a"} {
			ok(t, w, "send", countEv, `{"key":"`+k+`","by":3}`)
		}
		h := getStatus(t, w).JournalHeight
		if out := ok(t, w, "journal", "check"); !strings.Contains(out, "checked records 1..") || !strings.HasSuffix(out, "from genesis: ok\n") {
			t.Fatalf("journal check:\n%s", out)
		}
		var rep journalCheck
		jsonOut(t, w, &rep, "journal", "check")
		if !rep.OK || rep.Records != h || rep.First != 1 || rep.From != 1 || rep.To != h || rep.Snapshot != 0 || rep.Violations == nil {
			t.Fatalf("journal check --json: %+v, want a clean check of 1..%d", rep, h)
		}
		for _, bad := range [][]string{{"journal", "check", "extra"}, {"journal", "check", "--kind", "event"}, {"journal", "check", "--from", "2"}} {
			if r := aosd(t, w, bad...); r.code != 2 {
				t.Fatalf("aosd %v: exit %d, want 2\n%s%s", bad, r.code, r.stdout, r.stderr)
			}
		}
		// Retention: the journal now starts at the newest snapshot's
		// checkpoint, and the check starts after it, from its state.
		ok(t, w, "snapshot")
		ok(t, w, "send", countEv, `{"key":"c","by":1}`)
		var snap struct {
			Seq        uint64 `json:"seq"`
			Checkpoint uint64 `json:"checkpoint"`
		}
		jsonOut(t, w, &snap, "snapshot")
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)
		ok(t, w, "gc", "--keep-snapshots", "1", "--drop-journal")
		h = getStatus(t, w).JournalHeight
		jsonOut(t, w, &rep, "journal", "check")
		if !rep.OK || rep.First <= 1 || rep.First > snap.Checkpoint || rep.Snapshot != snap.Seq || rep.From != snap.Checkpoint+1 ||
			rep.To != h || rep.Records != h-snap.Checkpoint {
			t.Fatalf("journal check after retention: %+v, want a check of %d..%d from snapshot %d", rep, snap.Checkpoint+1, h, snap.Seq)
		}
		if out := ok(t, w, "journal", "check"); !strings.Contains(out, "from the snapshot at seq") {
			t.Fatalf("journal check after retention:\n%s", out)
		}
	})
}

// TestJournalCheckCatchesForgedRecord: a record no kernel would write (a
// receipt for an intent never opened, appended to the store behind the
// world's back) is reported with its seq and rule, exit 1, although the
// world itself can no longer open.
func TestJournalCheckCatchesForgedRecord(t *testing.T) {
	t.Parallel()
	w := newUncheckedWorld(t)
	ok(t, w, "apply", built.Path(t, "counter"))
	ok(t, w, "send", countEv, `{"key":"a","by":3}`)
	st := getStatus(t, w)
	forged := st.JournalHeight + 1
	db, err := badgerdb.Open(w + "/store")
	if err != nil {
		t.Fatal(err)
	}
	intent := schemas.HashBytes([]byte("never opened"))
	mh, err := schemas.ParseHash(*st.ManifestHash)
	if err != nil {
		t.Fatal(err)
	}
	body := records.EncodeReceipt(&records.ReceiptRec{
		Receipt: receipts.SignedReceipt{Receipt: receipts.Receipt{World: st.World, Intent: intent, Effect: "sys/timer.set@1", Executor: "aos/builtin",
			Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{})}},
		Stamp: records.Stamp{NowNs: 1 << 62, LogicalNs: 1 << 62, Entropy: make([]byte, 32), Height: forged - 1, ManifestHash: mh}})
	err = db.Journal().Append([]journal.Record{{Seq: forged, Kind: journal.KindReceipt, Body: body}})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if r := aosd(t, w, "status"); r.code != 1 {
		t.Fatalf("status on the forged journal: exit %d, want 1 (replay refuses it)\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := aosd(t, w, "journal", "check")
	if r.code != 1 || !strings.Contains(r.stdout, "receipt-unknown-intent") || !strings.Contains(r.stdout, intent.String()) ||
		!strings.Contains(r.stderr, "breaks 1 rule") {
		t.Fatalf("journal check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = aosd(t, w, "journal", "check", "--json")
	var rep journalCheck
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 || rep.OK || len(rep.Violations) != 1 ||
		rep.Violations[0].Seq != forged || rep.Violations[0].Rule != "receipt-unknown-intent" || string(rep.Violations[0].Key) != "null" {
		t.Fatalf("journal check --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
}
