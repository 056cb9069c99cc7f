package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/snapshot"
)

// TestProposedManifestLeavesLiveState: an apply that does not apply (a dry
// run, one refused because the world is not quiescent, one whose manifest
// cannot be bound) checks the proposed manifest beside the world, never in
// it. After each the live state is byte-identical to what it was, and to
// what a replay of the journal rebuilds, from genesis and from a snapshot,
// also after a snapshot taken then and a restart (a proposal that left a
// trace in the live state would be written into that snapshot for good).
func TestProposedManifestLeavesLiveState(t *testing.T) {
	h := newHarnessWith(t, 11, true, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		h.extra = func(c *kernel.Config) { c.SnapshotEvery, c.SnapshotInterval = -1, -1 }
	})
	ctx := context.Background()
	mustApply(t, h, counterManifest)
	for i := range 3 {
		if _, err := h.w.Submit(ctx, countEvent("k", i+1)); err != nil {
			t.Fatal(err)
		}
	}

	state := func() []byte {
		t.Helper()
		live, err := h.w.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := snapshot.Encode(live)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	verify := func(when string) {
		t.Helper()
		live, err := h.w.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := kernel.Verify(ctx, h.db.Stores(), h.config(), live)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK {
			t.Fatalf("%s: live state is not what the journal rebuilds: %+v", when, rep)
		}
	}
	// A new workflow (sorted first) and then one whose entrypoint the
	// module lacks: binding fails after the new one was bound.
	unbindable := strings.Replace(strings.ReplaceAll(twinManifest, "com.test/twin@1", "com.test/a_twin@1"),
		`"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}`, `"impl":{"module":"com.test/counter_mod@1","entrypoint":"nope"}`, 1)
	errAny := errors.New("any error")
	propose := func(name, src string, dryRun bool, wantErr error) {
		t.Helper()
		before, height := state(), h.height()
		res, err := h.w.Apply(ctx, loadManifest(t, src), dryRun)
		switch {
		case wantErr == errAny && err != nil:
		case wantErr == nil && err != nil, wantErr != nil && !errors.Is(err, wantErr):
			t.Fatalf("%s: err %v, want %v", name, err, wantErr)
		}
		if res == nil || res.Applied {
			t.Fatalf("%s: %+v", name, res)
		}
		if h.height() != height {
			t.Fatalf("%s: journal grew from %d to %d", name, height, h.height())
		}
		if after := state(); !bytes.Equal(before, after) {
			t.Fatalf("%s: the live state changed (%d bytes -> %d)", name, len(before), len(after))
		}
		verify(name)
	}

	// Quiescent: each proposal adds workflows the world has no cells for.
	propose("dry run", orderManifest, true, nil)
	propose("dry run of a twin", twinManifest, true, nil)
	propose("unbindable", unbindable, false, errAny)

	// Busy: an order waits on its charge.
	mustApply(t, h, orderManifest)
	if _, err := h.send("com.test/OrderCreated@1", `{"order_id":"o1","amount":5}`); err != nil {
		t.Fatal(err)
	}
	propose("refused", twinManifest, false, kernel.ErrNotQuiescent)
	propose("dry run, refused", twinManifest, true, kernel.ErrNotQuiescent)

	if _, err := h.w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	verify("after a snapshot")
	h.reopen()
	verify("after a restart")
}
