package kernel_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// mixManifest is a keyed workflow whose step does what the event's op says,
// so one world holds every kind of listing row: cells at rest, cells of
// waiting or failed instances, and instances without a cell that wait for a
// receipt or failed on their first event.
const mixManifest = `[
 {"$kind":"defschema","name":"com.test/MixOp@1","schema":{"type":"object","properties":{"key":{"type":"string"},"op":{"type":"string"}},"required":["key","op"]}},
 {"$kind":"defschema","name":"com.test/MixEvent@1","variant":{"Op":"com.test/MixOp@1","Receipt":"sys/EffectReceiptEnvelope@1","Rejected":"sys/EffectReceiptRejected@1"}},
 {"$kind":"defschema","name":"com.test/MixState@1","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
 {"$kind":"defschema","name":"com.test/MixKey@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/PingParams@1","schema":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}},
 {"$kind":"defschema","name":"com.test/PingReceipt@1","schema":{"type":"object"}},
 {"$kind":"defmodule","name":"com.test/mix_mod@1","runtime":{"kind":"builtin","builtin":"test/mix","identity":"test/mix@1"}},
 {"$kind":"defeffect","name":"com.test/ping@1","params":"com.test/PingParams@1","receipt":"com.test/PingReceipt@1"},
 {"$kind":"defworkflow","name":"com.test/mix@1","state":"com.test/MixState@1","event":"com.test/MixEvent@1","key_schema":"com.test/MixKey@1","effects_emitted":["com.test/ping@1"],"impl":{"module":"com.test/mix_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/mix","routing":{"subscriptions":[{"event":"com.test/MixOp@1","workflow":"com.test/mix@1","key_field":"key"}]}}
]`

const mixWF = "com.test/mix@1"

// mixStep: "set" writes {n: n+1}; "wait" opens an intent and keeps the
// state as it is (none, on a first event); "setwait" does both; "del"
// deletes the cell; "fail" fails the step.
func mixStep(in *modules.Input) (*modules.Output, error) {
	ev := decodeMap(nil, in.Event.Value)
	if ev["$tag"] != "Op" {
		return &modules.Output{State: in.State}, nil
	}
	op := ev["$value"].(map[string]any)
	var n int64
	if in.State != nil {
		n = toInt(decodeMap(nil, in.State)["n"])
	}
	next := schemas.MustMarshal(map[string]any{"n": n + 1})
	ping := []modules.EffectOut{{Effect: "com.test/ping@1", Params: schemas.MustMarshal(map[string]any{"key": op["key"]})}}
	switch op["op"] {
	case "set":
		return &modules.Output{State: next}, nil
	case "wait":
		return &modules.Output{State: in.State, Effects: ping}, nil
	case "setwait":
		return &modules.Output{State: next, Effects: ping}, nil
	case "del":
		return &modules.Output{State: nil}, nil
	}
	return nil, errors.New("told to fail")
}

func newMixHarness(t testing.TB, extra func(*kernel.Config)) *harness {
	h := newHarnessWith(t, 5, true, func(h *harness) {
		h.builtins.MustRegister("test/mix", "test/mix@1", "step", mixStep)
		h.extra = func(c *kernel.Config) {
			c.Publisher = &capture{} // intents stay in flight: no executor
			if extra != nil {
				extra(c)
			}
		}
	})
	mustApply(t, h, mixManifest)
	return h
}

func mixOp(key, op string) kernel.Event {
	return kernel.Event{Schema: "com.test/MixOp@1", JSON: []byte(fmt.Sprintf(`{"key":%q,"op":%q}`, key, op))}
}

// mixRow is what a listing must show for a key.
type mixRow struct {
	status string
	cell   bool
}

// buildMix sends n keys' worth of ops and returns the rows a listing must
// hold, by key. Keys cycle through every kind of row; some cells are
// deleted again, and their keys must not be listed.
func buildMix(t testing.TB, h *harness, n int) map[string]mixRow {
	t.Helper()
	want := map[string]mixRow{}
	var evs []kernel.Event
	for i := range n {
		key := fmt.Sprintf("k-%04d", i)
		switch i % 8 {
		case 0, 1, 2:
			evs = append(evs, mixOp(key, "set"))
			want[key] = mixRow{kernel.StatusCompleted, true}
		case 3: // fails on its first event: no cell
			evs = append(evs, mixOp(key, "fail"))
			want[key] = mixRow{kernel.StatusFailed, false}
		case 4: // waits before its first state: no cell
			evs = append(evs, mixOp(key, "wait"))
			want[key] = mixRow{kernel.StatusWaiting, false}
		case 5: // a cell that then waits
			evs = append(evs, mixOp(key, "setwait"))
			want[key] = mixRow{kernel.StatusWaiting, true}
		case 6: // a cell that then fails
			evs = append(evs, mixOp(key, "set"), mixOp(key, "fail"))
			want[key] = mixRow{kernel.StatusFailed, true}
		case 7: // a cell deleted again: no row
			evs = append(evs, mixOp(key, "set"), mixOp(key, "del"))
		}
	}
	for len(evs) > 0 {
		k := min(len(evs), 100)
		if _, err := h.w.Submit(context.Background(), evs[:k]...); err != nil {
			t.Fatal(err)
		}
		evs = evs[k:]
	}
	return want
}

// rowKeyHash is the listing position of a row: the key hash of its key, a
// canonical CBOR text.
func rowKeyHash(key []byte) (schemas.Hash, error) {
	var s string
	if err := schemas.Unmarshal(key, &s); err != nil {
		return schemas.Hash{}, fmt.Errorf("key %x: %w", key, err)
	}
	return cells.KeyHash(key), nil
}

func keyHashOf(t testing.TB, key []byte) schemas.Hash {
	t.Helper()
	kh, err := rowKeyHash(key)
	if err != nil {
		t.Fatal(err)
	}
	return kh
}

// pageThrough lists wf page by page with limit and checks each page (see
// pages), failing the test on any error.
func pageThrough(t testing.TB, w *kernel.World, wf string, limit int) []kernel.CellInfo {
	t.Helper()
	rows, err := pages(w, wf, limit, true)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// pages lists wf page by page with limit and checks each page: at most
// limit rows (exactly limit unless it is the last), strictly increasing key
// hashes all after the cursor, and a Next that is the last row's key hash.
// When quiet (no writes meanwhile) a page after a cursor is not empty: a
// cursor is only given when rows follow it. It returns every row.
func pages(w *kernel.World, wf string, limit int, quiet bool) ([]kernel.CellInfo, error) {
	var all []kernel.CellInfo
	after := ""
	for n := 0; ; n++ {
		p, err := w.CellPage(context.Background(), wf, after, limit)
		if err != nil {
			return nil, fmt.Errorf("limit %d page %d: %w", limit, n, err)
		}
		size := limit
		if size == 0 {
			size = kernel.DefaultCellPage
		}
		if len(p.Cells) > size || (p.Next != "" && len(p.Cells) != size) || (quiet && after != "" && len(p.Cells) == 0) {
			return nil, fmt.Errorf("limit %d page %d: %d rows, next %q", limit, n, len(p.Cells), p.Next)
		}
		var prev []byte
		if after != "" {
			prev, _ = hex.DecodeString(after)
		}
		for _, r := range p.Cells {
			kh, err := rowKeyHash(r.Key)
			if err != nil {
				return nil, err
			}
			if prev != nil && bytes.Compare(kh[:], prev) <= 0 {
				return nil, fmt.Errorf("limit %d page %d: row %s (%x) not after %x", limit, n, r.Key, kh[:4], prev[:4])
			}
			prev = kh[:]
		}
		all = append(all, p.Cells...)
		if p.Next == "" {
			return all, nil
		}
		if hex.EncodeToString(prev) != p.Next {
			return nil, fmt.Errorf("limit %d page %d: next %s, last row's key hash %x", limit, n, p.Next, prev)
		}
		after = p.Next
	}
}

// checkRows: rows hold every wanted key exactly once, with its status, a
// state hash exactly when it has a cell, and nothing else.
func checkRows(t testing.TB, what string, rows []kernel.CellInfo, want map[string]mixRow) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rows {
		var key string
		if err := schemas.Unmarshal(r.Key, &key); err != nil {
			t.Fatal(err)
		}
		if seen[key] {
			t.Fatalf("%s: %s listed twice", what, key)
		}
		seen[key] = true
		w, ok := want[key]
		if !ok {
			t.Fatalf("%s: %s listed, but has no cell and is at rest", what, key)
		}
		if r.Status != w.status || r.StateHash.IsZero() == w.cell {
			t.Fatalf("%s: %s is %s with state hash %s, want %s with a cell: %v", what, key, r.Status, r.StateHash, w.status, w.cell)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(seen), len(want))
	}
}

// TestCellPagesCoverEveryRow pages through a workflow whose rows are cells
// in the index, cells still in the delta, and instances with no cell
// (failed on their first event, waiting before their first state), with
// page sizes from 1 to the maximum: every row comes exactly once, in
// key-hash order, cell-less instances in their key-hash place between cells
// and across page boundaries; after a reopen (replay) the listing is the same.
func TestCellPagesCoverEveryRow(t *testing.T) {
	h := newMixHarness(t, func(c *kernel.Config) {
		// A small delta threshold: most cells are in the index, the
		// latest in the delta, so pages merge both.
		c.MaterializeAt, c.MaterializeChunk = 64, 16
	})
	want := buildMix(t, h, 800)
	stats, err := h.w.CellStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Workflow == mixWF && (s.Dirty == 0 || s.Dirty == s.Cells) {
			t.Fatalf("want cells in both the index and the delta: %+v", s)
		}
	}
	var first []kernel.CellInfo
	for _, limit := range []int{1, 2, 3, 7, 0, 250, kernel.MaxCellPage} {
		rows := pageThrough(t, h.w, mixWF, limit)
		checkRows(t, fmt.Sprintf("limit %d", limit), rows, want)
		if first == nil {
			first = rows
		} else if !sameRows(rows, first) {
			t.Fatalf("limit %d lists another order than limit 1", limit)
		}
	}
	// A cell-less instance sits between cells in the order, not after them.
	between := false
	for i := 1; i+1 < len(first); i++ {
		if first[i].StateHash.IsZero() && !first[i-1].StateHash.IsZero() && !first[i+1].StateHash.IsZero() {
			between = true
		}
	}
	if !between {
		t.Fatal("no cell-less row between two cells")
	}
	all, err := h.w.Cells(context.Background(), mixWF, 0)
	if err != nil || !sameRows(all, first) {
		t.Fatalf("Cells: %d rows, %v", len(all), err)
	}
	h.reopen()
	checkRows(t, "after reopen", pageThrough(t, h.w, mixWF, 9), want)
}

func sameRows(a, b []kernel.CellInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || a[i].Status != b[i].Status || a[i].StateHash != b[i].StateHash {
			return false
		}
	}
	return true
}

// TestCellPageCursorStartsStrictlyAfter: a page from a row's key hash starts
// with the row after it; from a key hash that is no row's, with the first
// row above it; from all ones, empty and last.
func TestCellPageCursorStartsStrictlyAfter(t *testing.T) {
	h := newMixHarness(t, nil)
	buildMix(t, h, 40)
	rows := pageThrough(t, h.w, mixWF, kernel.MaxCellPage)
	for i, r := range rows {
		kh := keyHashOf(t, r.Key)
		p, err := h.w.CellPage(context.Background(), mixWF, hex.EncodeToString(kh[:]), 1)
		if err != nil {
			t.Fatal(err)
		}
		if i+1 < len(rows) {
			if len(p.Cells) != 1 || !bytes.Equal(p.Cells[0].Key, rows[i+1].Key) {
				t.Fatalf("after row %d: %+v, want row %d", i, p.Cells, i+1)
			}
		} else if len(p.Cells) != 0 || p.Next != "" {
			t.Fatalf("after the last row: %+v", p)
		}
		// One below the row's key hash: the row itself comes first.
		below := kh
		for j := len(below) - 1; j >= 0; j-- {
			below[j]--
			if below[j] != 0xff {
				break
			}
		}
		p, err = h.w.CellPage(context.Background(), mixWF, hex.EncodeToString(below[:]), 1)
		if err != nil || len(p.Cells) != 1 || !bytes.Equal(p.Cells[0].Key, r.Key) {
			t.Fatalf("from just below row %d: %+v %v", i, p, err)
		}
	}
	p, err := h.w.CellPage(context.Background(), mixWF, strings.Repeat("f", 64), 5)
	if err != nil || len(p.Cells) != 0 || p.Next != "" {
		t.Fatalf("after all ones: %+v %v", p, err)
	}
}

// TestCellPageRefusals: a cursor that is not one, a page size out of range
// and an unknown workflow are ErrInvalid naming the parameter, and journal
// nothing.
func TestCellPageRefusals(t *testing.T) {
	h := newMixHarness(t, nil)
	buildMix(t, h, 10)
	height := h.w.Journal().Height()
	for _, c := range []struct {
		wf, after string
		limit     int
		msg       string
	}{
		{mixWF, "zz", 1, "after: cursor"},
		{mixWF, strings.Repeat("0", 63), 1, "after: cursor"},
		{mixWF, strings.Repeat("g", 64), 1, "after: cursor"},
		{mixWF, strings.Repeat("0", 66), 1, "after: cursor"},
		{mixWF, "", -1, "limit: -1"},
		{mixWF, "", kernel.MaxCellPage + 1, "limit: 10001 is not a page size (1..10000)"},
		{"com.test/nope@1", "", 1, `unknown workflow "com.test/nope@1"`},
	} {
		_, err := h.w.CellPage(context.Background(), c.wf, c.after, c.limit)
		if !errors.Is(err, kernel.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q after %q limit %d: %v, want ErrInvalid with %q", c.wf, c.after, c.limit, err, c.msg)
		}
	}
	if got := h.w.Journal().Height(); got != height {
		t.Fatalf("journal grew from %d to %d", height, got)
	}
	// The largest page is allowed, and the default is DefaultCellPage.
	if _, err := h.w.CellPage(context.Background(), mixWF, "", kernel.MaxCellPage); err != nil {
		t.Fatal(err)
	}
	if _, err := kernel.ParseCellCursor(strings.ToUpper(strings.Repeat("ab", 32))); err != nil {
		t.Fatalf("an upper-case cursor: %v", err)
	}
}

// TestCellPagesWhileStepping lists pages in a loop while events create,
// update, delete and fail cells and deltas are drained in the background
// (run with -race: the page is read off the loop). Every page read during
// the writes is in strictly increasing key-hash order after its cursor;
// once the writes stop, paging yields every row exactly once.
func TestCellPagesWhileStepping(t *testing.T) {
	h := newMixHarness(t, func(c *kernel.Config) {
		c.MaterializeAt, c.MaterializeChunk, c.MaterializeInBackground = 64, 16, true
	})
	var wg sync.WaitGroup
	var passes atomic.Int64
	stop := make(chan struct{})
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := pages(h.w, mixWF, 5+g*40, false); err != nil {
					t.Error(err)
					return
				}
				passes.Add(1)
			}
		}()
	}
	// Writes go on until the listers have paged through a few times.
	var want map[string]mixRow
	for round := 0; round < 3 || (passes.Load() < 4 && !t.Failed()); round++ {
		want = buildMix(t, h, 300+100*min(round, 5))
	}
	close(stop)
	wg.Wait()
	checkRows(t, "after the writes", pageThrough(t, h.w, mixWF, 13), want)
}
