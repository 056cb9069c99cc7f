package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
)

// Snapshots and replay verification: POST /v1/snapshot (`aosd snapshot`)
// and POST /v1/replay (`aosd replay`). Both run beside the world: a
// snapshot is written off the kernel's loop, and a replay runs in scratch
// worlds over the world's stores (kernel.ScratchStores), which write only
// to memory.

// Snapshot implements Writer.
func (l *Local) Snapshot(ctx context.Context) (*SnapshotResult, error) {
	res, err := l.W.Snapshot(ctx)
	if err != nil {
		return nil, AsError(err, "snapshot")
	}
	return SnapshotResultOf(res), nil
}

// Replay implements Reader. The live state is taken first (the world's
// loop pauses while it materializes every workflow's cells), then the
// scratch worlds replay up to its height while the world goes on.
func (l *Local) Replay(ctx context.Context, verify bool) (*ReplayReport, error) {
	live, err := l.W.State(ctx)
	if err != nil {
		return nil, AsError(err, "replay: the live state")
	}
	stores := kernel.Stores{CAS: l.W.CAS(), Journal: l.W.Journal()}
	rep, err := kernel.VerifyWith(ctx, stores, l.Config, live, kernel.VerifyOptions{SnapshotOnly: !verify})
	if err != nil {
		return nil, AsError(err, "replay")
	}
	return ReplayReportOf(rep), nil
}

// lastSnapshot is the latest snapshot record at or below height, nil when
// there is none. It reads the journal's kind index and the one record.
func lastSnapshot(log kernel.Log, height uint64) (*SnapshotRef, error) {
	var ref *SnapshotRef
	err := log.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) {
		if seq > height {
			return true, nil // journaled after the status was taken
		}
		var sr *records.SnapshotRec
		err := log.Read(seq, func(r journal.Record) (bool, error) {
			if r.Seq != seq || r.Kind != journal.KindSnapshot {
				return false, fmt.Errorf("the kind index names seq %d, the journal has a %s record at %d", seq, r.Kind, r.Seq)
			}
			rec, err := records.Decode(r)
			if err != nil {
				return false, err
			}
			sr, _ = rec.(*records.SnapshotRec)
			return false, nil
		})
		if err != nil {
			return false, fmt.Errorf("snapshot record %d: %w", seq, err)
		}
		if sr == nil {
			return false, fmt.Errorf("snapshot record %d: not in the journal", seq)
		}
		ref = &SnapshotRef{Seq: seq, Checkpoint: sr.Checkpoint, Object: sr.Object}
		return false, nil
	})
	return ref, err
}

// Snapshot implements Writer.
func (c *Client) Snapshot(ctx context.Context) (*SnapshotResult, error) {
	var out SnapshotResult
	if err := c.call(ctx, "POST", "/v1/snapshot", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Replay implements Reader.
func (c *Client) Replay(ctx context.Context, verify bool) (*ReplayReport, error) {
	var out ReplayReport
	if err := c.call(ctx, "POST", "/v1/replay?verify="+strconv.FormatBool(verify), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// snapshotRoute is POST /v1/snapshot: take a snapshot, answered once its
// record is durable; 409 not_idle while another is being written.
func (s *Server) snapshotRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "snapshot", body{}, func() (any, error) { return s.Backend.Snapshot(r.Context()) })
}

// replayRoute is POST /v1/replay?verify=BOOL: a replay report (200 whether
// or not the runs reached the live state; see ok).
func (s *Server) replayRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "replay", body{}, func() (any, error) {
		verify := false
		if v := r.URL.Query().Get("verify"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "verify", "verify %q is not true or false", v)
			}
			verify = b
		}
		return s.Backend.Replay(r.Context(), verify)
	})
}
