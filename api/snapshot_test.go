package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/storefault"
)

// TestSnapshotWhileOneIsWrittenIsNotIdle: while a snapshot's object is
// being written, POST /v1/snapshot is refused with 409 not_idle naming the
// snapshot in the way, and journals nothing; once it is written, the next
// snapshot is taken.
func TestSnapshotWhileOneIsWrittenIsNotIdle(t *testing.T) {
	gate := storefault.NewGate(storefault.CASPut) // holds the first snapshot's object write
	store := &storefault.CAS{Store: cas.NewMemory(), BeforeWrite: gate.Hook}
	log := journal.NewMemory()
	w, err := kernel.Open(kernel.Stores{CAS: store, Journal: log}, kernel.Config{SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	hs := httptest.NewServer((&api.Server{Backend: api.NewLocal(w, nil), Token: "tok"}).Handler())
	defer hs.Close()
	cl := &api.Client{Base: hs.URL, Token: "tok"}
	ctx := context.Background()

	defer gate.Open() // first of the deferred: a failing test must not leave the snapshot held
	gate.Arm()
	first := make(chan error, 1)
	go func() {
		_, err := cl.Snapshot(ctx)
		first <- err
	}()
	<-gate.Entered()
	// The writer starts once the checkpoint is journaled, maybe before the
	// committer made it durable: wait for it (seq 2, after the world
	// record), then the height holds still until the gate opens.
	height, err := log.Wait(ctx, 1)
	if err != nil || height != 2 {
		t.Fatalf("waiting for the checkpoint: height %d, %v", height, err)
	}
	_, err = cl.Snapshot(ctx)
	var de *api.Error
	if !errors.As(err, &de) || de.Status != http.StatusConflict || de.Code != api.CodeNotIdle ||
		!strings.Contains(de.Message, "the snapshot of checkpoint 2 is still being written") {
		t.Fatalf("snapshot while one is written: %v (%+v), want 409 not_idle naming checkpoint 2", err, de)
	}
	if log.Height() != height {
		t.Fatalf("the refused snapshot journaled: height %d, was %d", log.Height(), height)
	}
	gate.Open()
	if err := <-first; err != nil {
		t.Fatalf("the first snapshot: %v", err)
	}
	res, err := cl.Snapshot(ctx)
	if err != nil || res.Checkpoint != 4 || res.Seq != 5 || res.Object.IsZero() || res.Bytes == 0 {
		t.Fatalf("the next snapshot: %+v, %v", res, err)
	}
	st, err := cl.Status(ctx)
	if err != nil || st.LastSnapshot == nil || *st.LastSnapshot != (api.SnapshotRef{Seq: 5, Checkpoint: 4, Object: res.Object}) ||
		st.RecordsSinceSnapshot != 1 {
		t.Fatalf("status after two snapshots: %+v, %v", st, err)
	}
}

// TestReplayVerifyParameter: verify must be a boolean; anything else is
// 400 invalid_input naming it.
func TestReplayVerifyParameter(t *testing.T) {
	s := serveWorld(t, false)
	code, body := s.do(t, "POST", "/v1/replay?verify=perhaps", "")
	if code != 400 || !strings.Contains(body, `"code":"invalid_input"`) || !strings.Contains(body, `"where":"verify"`) {
		t.Fatalf("verify=perhaps: %d %s", code, body)
	}
}
