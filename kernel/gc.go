package kernel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// Garbage collection of the CAS (docs/snapshots.md).
//
// What is kept: everything reachable from
//   - the newest GCOptions.KeepSnapshots snapshots (their objects, manifest
//     sources, artifacts, and their CellIndexes: nodes and states);
//   - the live head: each workflow's current index and the states its
//     delta spilled to the CAS;
//   - the wasm artifacts of every manifest the journal still holds, so a
//     replay from genesis can run the old code;
//   - the blobs sys/blob.put stored, while the receipt that names them is in
//     the journal (states refer to blobs only inside their own bytes, which
//     the kernel does not interpret).
//
// It runs beside the running world. The world's CAS writes all go through a
// cas.Guard: the roots are taken on the loop after the Guard started
// recording (with every drain installed and no snapshot being written), and
// the sweep spares whatever was written since, so an object the world names
// again after the roots were taken is either marked or recorded.

// DefaultKeepSnapshots is how many snapshots a collection keeps by default.
const DefaultKeepSnapshots = 2

// GCOptions configure a collection.
type GCOptions struct {
	// KeepSnapshots is how many of the newest snapshots stay usable (and
	// keep what they reach); 0 means DefaultKeepSnapshots.
	KeepSnapshots int
	// Progress draws the mark and sweep phases.
	Progress Progress
	// DropJournal applies journal retention first: the journal's whole
	// frames before the checkpoint of the oldest kept snapshot are dropped
	// (after which a replay from genesis is impossible). Archive, when set,
	// receives each dropped frame before it goes. The journal must support
	// it (journal.Dropper).
	DropJournal bool
	Archive     func(first uint64, frame []byte) error
}

// Dropper is the journal retention a backend may offer (badgerdb and
// journal.Memory do).
type Dropper interface {
	DropBefore(before uint64, archive func(first uint64, frame []byte) error) (journal.DropStats, error)
}

// GCResult says what a collection did.
type GCResult struct {
	cas.GCStats
	Marked    int      // objects marked reachable
	Snapshots []uint64 // seqs of the snapshot records whose snapshots were kept
	Blobs     int      // blobs kept because a receipt in the journal names them
	// Journal is what retention dropped (DropJournal); nil when it did not run.
	Journal  *journal.DropStats
	Duration time.Duration
}

// GC collects the CAS objects nothing reaches. It runs while the world
// runs; only one collection runs at a time (cas.ErrCollecting).
func (w *World) GC(ctx context.Context, opts GCOptions) (GCResult, error) {
	t0 := time.Now()
	keep := opts.KeepSnapshots
	if keep <= 0 {
		keep = DefaultKeepSnapshots
	}
	var dropped *journal.DropStats
	if opts.DropJournal {
		ds, err := w.dropJournal(keep, opts.Archive)
		if err != nil {
			return GCResult{}, err
		}
		dropped = &ds
	}
	var col *cas.Collection
	var live []snapshot.Pins
	for {
		var busy chan struct{}
		var rerr error
		err := w.do(ctx, func(st *state) {
			if st.snap != nil {
				busy = st.snap.done
				return
			}
			col, live, rerr = st.gcRoots()
		})
		if err != nil {
			return GCResult{}, err
		}
		if rerr != nil {
			return GCResult{}, rerr
		}
		if busy == nil {
			break
		}
		select { // a snapshot is being written: its objects are not named yet
		case <-busy:
		case <-ctx.Done():
			return GCResult{}, ctx.Err()
		}
	}
	res := GCResult{Journal: dropped}
	roots, err := w.journalPins(keep, &res)
	if err != nil {
		col.Abort()
		return GCResult{}, err
	}
	roots = append(roots, live...)
	mark := opts.Progress.start("gc: mark", 0)
	var sweep ProgressBar
	var swept uint64
	stats, err := snapshot.Collect(col, w.guard, roots, snapshot.Progress{
		// Both are called with running totals; the bars take increments.
		Marked: func(n int) { mark.Add(uint64(n - res.Marked)); res.Marked = n },
		Swept: func(done, total int) {
			if sweep == nil {
				mark.Finish()
				sweep = opts.Progress.start("gc: sweep", uint64(total))
			}
			sweep.Add(uint64(done) - swept)
			swept = uint64(done)
		},
	})
	mark.Finish()
	if sweep != nil {
		sweep.Finish()
	}
	if err != nil {
		return GCResult{}, fmt.Errorf("kernel: gc: %w", err)
	}
	res.GCStats = stats
	res.Duration = time.Since(t0)
	return res, nil
}

// gcRoots starts a collection and takes the live head's roots, on the
// loop: every drain installed first, so no cell write made before the
// collection began is named later without being a root.
func (st *state) gcRoots() (*cas.Collection, []snapshot.Pins, error) {
	for _, n := range slices.Sorted(maps.Keys(st.drains)) {
		if !st.installDrain(n) {
			return nil, nil, st.stopped
		}
	}
	col, err := st.w.guard.Begin()
	if err != nil {
		return nil, nil, err
	}
	var p snapshot.Pins
	for _, n := range slices.Sorted(maps.Keys(st.heads)) {
		h := st.heads[n]
		if r := h.Root(); !r.IsZero() {
			p.Indexes = append(p.Indexes, r)
		}
		p.Objects = append(p.Objects, h.Spilled()...)
	}
	for _, lm := range st.live { // the current manifest and those kept for pins
		hs, _ := artifactsOf(lm.m)
		p.Objects = append(p.Objects, hs...)
	}
	return col, []snapshot.Pins{p}, nil
}

// journalPins lists what the journal keeps alive: the newest keep
// snapshots, every manifest's artifacts, and the blobs named by receipts.
func (w *World) journalPins(keep int, res *GCResult) ([]snapshot.Pins, error) {
	var out []snapshot.Pins
	err := w.journal.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) {
		sr, err := snapshot.ReadRecord(w.journal, seq)
		if err != nil {
			return false, err
		}
		s, err := snapshot.LoadObject(w.cas.Get, sr.Object)
		if err != nil {
			return false, fmt.Errorf("snapshot record %d: %w", seq, err)
		}
		p := s.Pins()
		p.Objects = append(p.Objects, sr.Object)
		out = append(out, p)
		res.Snapshots = append(res.Snapshots, seq)
		return len(res.Snapshots) < keep, nil
	})
	if err != nil {
		return nil, fmt.Errorf("kernel: gc: snapshots: %w", err)
	}
	var arts snapshot.Pins
	err = w.journal.Marks(journal.KindManifest, func(seq uint64) (bool, error) {
		r, err := journal.ReadAt(w.journal, seq)
		if err != nil {
			return false, err
		}
		var mr records.ManifestRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			return false, fmt.Errorf("manifest record %d: %w", seq, err)
		}
		// Rebuilding the manifest names its artifacts (and proves they are
		// there: a missing one fails the collection before it deletes).
		_, err = manifest.FromSource(mr.Source, func(h schemas.Hash) ([]byte, error) {
			arts.Objects = append(arts.Objects, h)
			return w.cas.Get(h)
		})
		if err != nil {
			return false, fmt.Errorf("manifest record %d: %w", seq, err)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("kernel: gc: manifests: %w", err)
	}
	blobs := snapshot.Pins{}
	err = w.journal.Read(w.journal.First(), journal.OnlyKinds([]journal.Kind{journal.KindReceipt}, func(r journal.Record) (bool, error) {
		var rr records.ReceiptRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			return false, fmt.Errorf("receipt record %d: %w", r.Seq, err)
		}
		if rr.Receipt.Effect != manifest.SysBlobPut || rr.Receipt.Status != receipts.StatusOK {
			return true, nil
		}
		var p sys.BlobPutReceipt
		if schemas.UnmarshalTrusted(rr.Receipt.Payload, &p) == nil {
			if h, err := schemas.ParseHash(p.BlobRef); err == nil {
				blobs.Objects = append(blobs.Objects, h)
			}
		}
		return true, nil
	}))
	if err != nil {
		return nil, fmt.Errorf("kernel: gc: blobs: %w", err)
	}
	res.Blobs = len(blobs.Objects)
	return append(out, arts, blobs), nil
}

// dropJournal drops the journal before the checkpoint of the oldest of the
// newest keep snapshots. With fewer snapshots than keep it drops before the
// oldest there is; with none it drops nothing.
func (w *World) dropJournal(keep int, archive func(uint64, []byte) error) (journal.DropStats, error) {
	d, ok := w.journal.(Dropper)
	if !ok {
		return journal.DropStats{}, fmt.Errorf("kernel: gc: this journal (%T) does not support retention", w.journal)
	}
	var oldest uint64
	n := 0
	err := w.journal.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) {
		sr, err := snapshot.ReadRecord(w.journal, seq)
		if err != nil {
			return false, err
		}
		oldest = sr.Checkpoint
		n++
		return n < keep, nil
	})
	if err != nil {
		return journal.DropStats{}, fmt.Errorf("kernel: gc: retention: %w", err)
	}
	if oldest == 0 {
		return journal.DropStats{First: w.journal.First()}, nil
	}
	ds, err := d.DropBefore(oldest, archive)
	if err != nil {
		return ds, fmt.Errorf("kernel: gc: retention: drop before seq %d: %w", oldest, err)
	}
	return ds, nil
}
