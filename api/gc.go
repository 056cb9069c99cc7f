package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
)

// GCRequest is POST /v1/gc's body.
type GCRequest struct {
	// KeepSnapshots: how many of the newest snapshots stay usable (0: the
	// kernel's default, 2).
	KeepSnapshots int `json:"keep_snapshots,omitempty"`
	// DropJournal applies retention: the journal before the checkpoint of
	// the oldest kept snapshot is dropped (replay from genesis becomes
	// impossible).
	DropJournal bool `json:"drop_journal,omitempty"`
	// Archive, with DropJournal: an absolute path, not existing yet, where
	// the world's process writes the dropped frames first.
	Archive string `json:"archive,omitempty"`
	// Progress draws the phases when the world is open in this process.
	Progress kernel.Progress `json:"-"`
}

// GCOutput is what a collection did.
type GCOutput struct {
	Marked        int          `json:"marked"`
	KeptObjects   int          `json:"kept_objects"`
	KeptBytes     int64        `json:"kept_bytes"`
	FreedObjects  int          `json:"freed_objects"`
	FreedBytes    int64        `json:"freed_bytes"`
	KeptWritten   int          `json:"kept_written"`
	SnapshotsKept []uint64     `json:"snapshots_kept"`
	BlobsKept     int          `json:"blobs_kept"`
	Journal       *JournalDrop `json:"journal"`
	DurationMs    float64      `json:"duration_ms"`
}

// JournalDrop is what retention dropped.
type JournalDrop struct {
	Frames  int    `json:"frames"`
	Records int    `json:"records"`
	Bytes   int64  `json:"bytes"`
	First   uint64 `json:"first"`
	Archive string `json:"archive,omitempty"`
}

// checkGC refuses a request that cannot run, naming the field.
func checkGC(req *GCRequest) error {
	switch {
	case req.KeepSnapshots < 0:
		return newError(http.StatusBadRequest, CodeInvalidInput, "keep_snapshots", "keep_snapshots %d is negative", req.KeepSnapshots)
	case req.Archive != "" && !req.DropJournal:
		return newError(http.StatusBadRequest, CodeInvalidInput, "archive", "archive is written only when the journal is dropped (drop_journal)")
	case req.Archive != "" && !filepath.IsAbs(req.Archive):
		return newError(http.StatusBadRequest, CodeInvalidInput, "archive", "archive %q must be an absolute path (the world's process writes it)", req.Archive)
	}
	return nil
}

// GC implements Writer.
func (l *Local) GC(ctx context.Context, req GCRequest) (out *GCOutput, err error) {
	if err := checkGC(&req); err != nil {
		return nil, err
	}
	opts := kernel.GCOptions{KeepSnapshots: req.KeepSnapshots, DropJournal: req.DropJournal, Progress: req.Progress}
	var f *os.File
	var aw *journal.ArchiveWriter
	if req.Archive != "" {
		f, err = os.OpenFile(req.Archive, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, "archive", "%v", err)
		}
		aw = journal.NewArchiveWriter(f)
		opts.Archive = aw.Frame
		defer func() {
			cerr := aw.Close()
			if cerr == nil {
				cerr = f.Sync()
			}
			if e := f.Close(); cerr == nil {
				cerr = e
			}
			if cerr != nil && err == nil {
				out, err = nil, AsError(fmt.Errorf("archive %s: %w", req.Archive, cerr), "gc")
			}
		}()
	}
	res, err := l.W.GC(ctx, opts)
	if err != nil {
		if errors.Is(err, cas.ErrCollecting) {
			return nil, newError(http.StatusConflict, CodeConflict, "gc", "%v", err)
		}
		return nil, AsError(err, "gc")
	}
	out = &GCOutput{Marked: res.Marked, KeptObjects: res.KeptObjects, KeptBytes: res.KeptBytes,
		FreedObjects: res.FreedObjects, FreedBytes: res.FreedBytes, KeptWritten: res.KeptWritten,
		SnapshotsKept: append([]uint64{}, res.Snapshots...), BlobsKept: res.Blobs,
		DurationMs: float64(res.Duration.Microseconds()) / 1000}
	if d := res.Journal; d != nil {
		out.Journal = &JournalDrop{Frames: d.Frames, Records: d.Records, Bytes: d.Bytes, First: d.First, Archive: req.Archive}
	}
	return out, nil
}

// GC implements Writer over POST /v1/gc.
func (c *Client) GC(ctx context.Context, req GCRequest) (*GCOutput, error) {
	var out GCOutput
	if err := c.call(ctx, "POST", "/v1/gc", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// gcRoute is POST /v1/gc.
func (s *Server) gcRoute(w http.ResponseWriter, r *http.Request) {
	var req GCRequest
	s.handle(w, r, "gc", body{into: &req, shape: `{"keep_snapshots": N, "drop_journal": bool, "archive": "/abs/path"}`}, func() (any, error) {
		return s.Backend.GC(r.Context(), req)
	})
}
