package kernel_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// keyed is ev submitted under idempotency key k.
func keyed(k string, ev kernel.Event) kernel.Event {
	ev.IdempotencyKey = k
	return ev
}

// idemHarness is a counter world on disk, with limits.
func idemHarness(t *testing.T, lim kernel.Limits) *harness {
	t.Helper()
	h := newHarnessWith(t, 7, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.Limits = lim }
	})
	mustApply(t, h, counterManifest)
	return h
}

func (h *harness) ingest(evs ...kernel.Event) []kernel.Ingested {
	h.t.Helper()
	res, err := h.w.Ingest(context.Background(), evs...)
	if err != nil {
		h.t.Fatalf("ingest: %v", err)
	}
	if len(res) != len(evs) {
		h.t.Fatalf("ingest: %d results for %d events", len(res), len(evs))
	}
	return res
}

func (h *harness) height() uint64 { return h.w.Journal().Height() }

func (h *harness) count(key string) int64 {
	h.t.Helper()
	v, err := h.w.Cell(context.Background(), "com.test/counter@1", schemas.MustMarshal(key))
	if err != nil {
		h.t.Fatalf("cell %s: %v", key, err)
	}
	var s struct{ Count int64 }
	if err := schemas.UnmarshalTrusted(v.State, &s); err != nil {
		h.t.Fatalf("cell %s state %s: %v", key, stateJSON(v), err)
	}
	return s.Count
}

// eventsWithKey are the journaled events carrying idempotency key k.
func eventsWithKey(t *testing.T, w *kernel.World, k string) []records.EventRec {
	t.Helper()
	var out []records.EventRec
	for _, r := range allRecords(t, w) {
		if r.Kind != journal.KindEvent {
			continue
		}
		var ev records.EventRec
		if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.IdempotencyKey == k {
			out = append(out, ev)
		}
	}
	return out
}

// TestIdempotentResend: a resend under a remembered key answers the
// original seq as a duplicate and journals nothing, however its JSON is
// spelled; an event with no key, or another key, is new.
func TestIdempotentResend(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	if l := h.w.Limits(); l.IdempotencyWindowSeconds != 86400 || l.MaxIdempotencyKeys != 1_000_000 {
		t.Fatalf("default bounds %d s, %d keys; docs promise 86400 s and 1,000,000", l.IdempotencyWindowSeconds, l.MaxIdempotencyKeys)
	}
	first := h.ingest(keyed("order-1", countEvent("a", 1)))[0]
	if first.Duplicate || first.Seq == 0 {
		t.Fatalf("first send: %+v", first)
	}
	height := h.height()
	for _, js := range []string{`{"key":"a","by":1}`, `{ "by": 1, "key": "a" }`} {
		ev := kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(js), IdempotencyKey: "order-1"}
		if got := h.ingest(ev)[0]; !reflect.DeepEqual(got, kernel.Ingested{Seq: first.Seq, Duplicate: true}) {
			t.Fatalf("resend %s: %+v, want seq %d duplicate", js, got, first.Seq)
		}
		seqs, err := h.w.Submit(context.Background(), ev)
		if err != nil || len(seqs) != 1 || seqs[0] != first.Seq {
			t.Fatalf("resend through Submit: %v %v", seqs, err)
		}
	}
	if h.height() != height {
		t.Fatalf("resends journaled: height %d -> %d", height, h.height())
	}
	if n := h.count("a"); n != 1 {
		t.Fatalf("count %d after one event and its resends, want 1", n)
	}
	if got := h.ingest(countEvent("a", 1))[0]; got.Duplicate || got.Seq <= height {
		t.Fatalf("same event without a key: %+v, want a new event", got)
	}
	if got := h.ingest(keyed("order-2", countEvent("a", 1)))[0]; got.Duplicate {
		t.Fatalf("same event under another key: %+v, want a new event", got)
	}
	if n := len(eventsWithKey(t, h.w, "order-1")); n != 1 {
		t.Fatalf("%d journaled events carry key order-1, want 1", n)
	}
}

// TestIdempotencyConflict: a remembered key with another value or schema is
// refused with ErrIdempotencyConflict naming the key and the original seq,
// and the whole request is refused before anything of it is journaled.
func TestIdempotencyConflict(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	orig := h.ingest(keyed("k1", countEvent("a", 1)))[0]
	height := h.height()
	total := kernel.Event{Schema: "com.test/Total@1", JSON: []byte(`{"key":"a","count":1}`)}
	for name, evs := range map[string][]kernel.Event{
		"other value":            {keyed("k1", countEvent("a", 2))},
		"other schema":           {keyed("k1", total)},
		"late in a batch":        {keyed("k2", countEvent("b", 1)), countEvent("c", 1), keyed("k1", countEvent("a", 2))},
		"twice in one request":   {keyed("k3", countEvent("b", 1)), keyed("k3", countEvent("b", 2))},
		"after a good resend":    {keyed("k1", countEvent("a", 1)), keyed("k1", countEvent("a", 3))},
		"first of a new key too": {keyed("k4", countEvent("d", 1)), keyed("k4", countEvent("d", 1)), keyed("k4", countEvent("e", 1))},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := h.w.Ingest(context.Background(), evs...)
			if !errors.Is(err, kernel.ErrIdempotencyConflict) || len(res) != 0 {
				t.Fatalf("got %+v, %v; want ErrIdempotencyConflict and no results", res, err)
			}
			if h.height() != height {
				t.Fatalf("refused request journaled: height %d -> %d", height, h.height())
			}
			msg := err.Error()
			want := []string{"nothing was journaled"}
			switch {
			case strings.Contains(msg, `"k1"`):
				want = append(want, "seq "+strconv.FormatUint(orig.Seq, 10))
			case strings.Contains(msg, `"k3"`):
				want = append(want, "event 1:", "event 0 of this request")
			case strings.Contains(msg, `"k4"`):
				want = append(want, "event 2:", "event 0 of this request")
			default:
				t.Fatalf("error names no key: %v", err)
			}
			if len(evs) > 1 && name == "late in a batch" {
				want = append(want, "event 2:")
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
	// Nothing of the refused requests is remembered: their keys are new.
	for _, k := range []string{"k2", "k3", "k4"} {
		if got := h.ingest(keyed(k, countEvent("z", 5)))[0]; got.Duplicate {
			t.Errorf("key %s of a refused request is remembered: %+v", k, got)
		}
	}
	if n := h.count("a"); n != 1 {
		t.Fatalf("count a %d, want 1", n)
	}
}

// TestIdempotencyWithinBatch: a key twice in one request with the same event
// journals it once; the second answer is the first's seq, as a duplicate.
func TestIdempotencyWithinBatch(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	before := h.height()
	res := h.ingest(keyed("x", countEvent("a", 1)), countEvent("b", 1), keyed("x", countEvent("a", 1)), keyed("y", countEvent("a", 2)))
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[3].Duplicate {
		t.Fatalf("duplicate flags: %+v", res)
	}
	if res[2].Seq != res[0].Seq || res[1].Seq <= res[0].Seq || res[3].Seq <= res[1].Seq {
		t.Fatalf("seqs: %+v", res)
	}
	if n := len(eventsWithKey(t, h.w, "x")); n != 1 {
		t.Fatalf("%d journaled events carry key x, want 1", n)
	}
	if n := h.count("a"); n != 3 {
		t.Fatalf("count a %d, want 3 (1 + 2, the duplicate not counted)", n)
	}
	// 3 events, each one step: 6 records.
	if got := h.height() - before; got != 6 {
		t.Fatalf("batch journaled %d records, want 6", got)
	}
}

// TestIdempotencyKeyChecked: a bad key is refused as invalid input naming
// the event and the problem, before anything is journaled.
func TestIdempotencyKeyChecked(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	height := h.height()
	for _, c := range []struct{ key, says string }{
		{strings.Repeat("k", 257), "257 bytes; at most 256"},
		{"has space", "byte 0x20 at offset 3"},
		{"tab\there", "byte 0x09 at offset 3"},
		{"caf\u00e9", "byte 0xc3 at offset 3"},
		{"nul\x00", "byte 0x00 at offset 3"},
	} {
		_, err := h.w.Ingest(context.Background(), countEvent("a", 1), keyed(c.key, countEvent("a", 1)))
		if !errors.Is(err, kernel.ErrInvalid) {
			t.Fatalf("key %.40q: got %v, want ErrInvalid", c.key, err)
		}
		for _, w := range []string{"event 1", "idempotency key", c.says} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("key %.40q: error %q does not say %q", c.key, err, w)
			}
		}
	}
	if h.height() != height {
		t.Fatalf("bad keys journaled: height %d -> %d", height, h.height())
	}
	for _, k := range []string{strings.Repeat("k", 256), "!", "~a-Z_0.9:/=+"} {
		if got := h.ingest(keyed(k, countEvent("a", 1)))[0]; got.Duplicate {
			t.Fatalf("key %.40q: %+v", k, got)
		}
	}
}

// TestIdempotencyEvictionByCount: at most MaxIdempotencyKeys are remembered,
// oldest forgotten first; a forgotten key is new again; replay forgets the
// same ones.
func TestIdempotencyEvictionByCount(t *testing.T) {
	h := idemHarness(t, kernel.Limits{MaxIdempotencyKeys: 3})
	orig := map[string]uint64{}
	for _, k := range []string{"k0", "k1", "k2", "k3"} {
		orig[k] = h.ingest(keyed(k, countEvent(k, 1)))[0].Seq
	}
	// k0 was forgotten when k3 came: a resend is a new event (and pushes
	// out k1); k3 is remembered.
	again := h.ingest(keyed("k0", countEvent("k0", 1)))[0]
	if again.Duplicate || again.Seq == orig["k0"] {
		t.Fatalf("resend of the evicted k0: %+v, want a new event", again)
	}
	if got := h.ingest(keyed("k3", countEvent("k3", 1)))[0]; !reflect.DeepEqual(got, kernel.Ingested{Seq: orig["k3"], Duplicate: true}) {
		t.Fatalf("resend of k3: %+v", got)
	}
	orig["k0"] = again.Seq
	h.reopen()
	for _, k := range []string{"k2", "k3", "k0"} {
		if got := h.ingest(keyed(k, countEvent(k, 1)))[0]; !reflect.DeepEqual(got, kernel.Ingested{Seq: orig[k], Duplicate: true}) {
			t.Fatalf("after replay, resend of %s: %+v, want seq %d duplicate", k, got, orig[k])
		}
	}
	if got := h.ingest(keyed("k1", countEvent("k1", 1)))[0]; got.Duplicate {
		t.Fatalf("after replay, k1 is still remembered: %+v", got)
	}
}

// TestIdempotencyEvictionByWindow: a key is forgotten by the first ingress
// event stamped the window or more (journaled logical time) after it, and
// not before; with no such event it is still remembered, whatever the clock.
func TestIdempotencyEvictionByWindow(t *testing.T) {
	const window = 60
	h := idemHarness(t, kernel.Limits{IdempotencyWindowSeconds: window})
	k1 := h.ingest(keyed("k1", countEvent("a", 1)))[0]
	stamped := eventsWithKey(t, h.w, "k1")[0].Stamp.LogicalNs
	dup := kernel.Ingested{Seq: k1.Seq, Duplicate: true}

	h.clock.now = stamped + 10*window*1e9 // the clock is read only by new events
	if got := h.ingest(keyed("k1", countEvent("a", 1)))[0]; !reflect.DeepEqual(got, dup) {
		t.Fatalf("no event since, clock far ahead: %+v, want %+v", got, dup)
	}
	h.clock.now = stamped // the next stamp is stamped+1000 by the step clock
	h.ingest(countEvent("b", 1))
	h.clock.now = stamped + window*1e9 - 1000 - 1 // next stamp: 1 ns short of the window
	h.ingest(countEvent("b", 1))
	if got := h.ingest(keyed("k1", countEvent("a", 1)))[0]; !reflect.DeepEqual(got, dup) {
		t.Fatalf("an event 1 ns inside the window: %+v, want %+v", got, dup)
	}
	h.clock.now = stamped + window*1e9 - 1000 // next stamp: exactly the window later
	h.ingest(countEvent("b", 1))
	if got := h.ingest(keyed("k1", countEvent("a", 1)))[0]; got.Duplicate {
		t.Fatalf("an event a window later was journaled, k1 still remembered: %+v", got)
	}
	// Replay forgets it at the same event: the key's new event stands.
	fresh := eventsWithKey(t, h.w, "k1")
	if len(fresh) != 2 {
		t.Fatalf("%d events carry k1, want 2", len(fresh))
	}
	last := h.ingest(keyed("k1", countEvent("a", 1)))[0]
	h.reopen()
	if got := h.ingest(keyed("k1", countEvent("a", 1)))[0]; !reflect.DeepEqual(got, last) || !got.Duplicate {
		t.Fatalf("after replay: %+v, want %+v", got, last)
	}
}

// TestIdempotencyAcrossReopen: the key table is rebuilt by replay from the
// journaled events, so a resend after a restart is still a duplicate.
func TestIdempotencyAcrossReopen(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	orig := h.ingest(keyed("k", countEvent("a", 1)), keyed("j", countEvent("b", 1)))
	height := h.height()
	h.reopen()
	got := h.ingest(keyed("j", countEvent("b", 1)), keyed("k", countEvent("a", 1)))
	if !reflect.DeepEqual(got[0], kernel.Ingested{Seq: orig[1].Seq, Duplicate: true}) || !reflect.DeepEqual(got[1], kernel.Ingested{Seq: orig[0].Seq, Duplicate: true}) {
		t.Fatalf("after reopen: %+v, want the seqs of %+v as duplicates", got, orig)
	}
	if _, err := h.w.Ingest(context.Background(), keyed("k", countEvent("a", 9))); !errors.Is(err, kernel.ErrIdempotencyConflict) {
		t.Fatalf("conflict after reopen: %v", err)
	}
	if h.height() != height {
		t.Fatalf("height %d -> %d", height, h.height())
	}
}

// TestReplayRefusesRemembered: a journal holding a second event under a
// key the table remembers is one live ingress could not have written.
func TestReplayRefusesRemembered(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	h.uncheckedJournal = true // it forges a second event under the key
	h.ingest(keyed("k", countEvent("a", 1)))
	body := eventsWithKey(t, h.w, "k")[0]
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	jn := h.db.Journal()
	next := jn.Height() + 1
	if err := jn.Append([]journal.Record{{Seq: next, Kind: journal.KindEvent, Body: schemas.MustMarshal(&body)}}); err != nil {
		t.Fatal(err)
	}
	w, err := kernel.Open(h.db.Stores(), h.config())
	if err == nil {
		w.Close()
		t.Fatal("replay accepted a second event under a remembered key")
	}
	var re *kernel.ReplayError
	if !errors.As(err, &re) || re.Seq != next || !strings.Contains(err.Error(), `idempotency key "k" is remembered`) {
		t.Fatalf("got %v, want a replay error at seq %d naming the key", err, next)
	}
}

// TestIdempotencyConcurrent: many clients resending one keyed event at once
// journal it once and all get its seq, each only once it is durable.
func TestIdempotencyConcurrent(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	const clients = 16
	type answer struct {
		got     kernel.Ingested
		durable uint64
		err     error
	}
	answers := make(chan answer, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.w.Ingest(context.Background(), keyed("once", countEvent("a", 1)))
			a := answer{err: err, durable: h.w.Journal().Height()}
			if err == nil {
				a.got = res[0]
			}
			answers <- a
		}()
	}
	wg.Wait()
	close(answers)
	var seq uint64
	fresh := 0
	for a := range answers {
		if a.err != nil {
			t.Fatal(a.err)
		}
		if seq == 0 {
			seq = a.got.Seq
		}
		if a.got.Seq != seq {
			t.Fatalf("answers name seqs %d and %d", seq, a.got.Seq)
		}
		if a.durable < a.got.Seq {
			t.Fatalf("answered seq %d while the journal was durable only to %d", a.got.Seq, a.durable)
		}
		if !a.got.Duplicate {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d answers say new, want exactly 1", fresh)
	}
	if n := len(eventsWithKey(t, h.w, "once")); n != 1 {
		t.Fatalf("%d journaled events carry the key, want 1", n)
	}
	if n := h.count("a"); n != 1 {
		t.Fatalf("count %d, want 1", n)
	}
}
