package kernel

import (
	"context"
	"sync"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
)

// ScratchStores are stores for a scratch world over a live world's: the
// journal as it stands up to height, then an in-memory tail the scratch
// world appends to; the CAS read through, with every write kept in memory
// (cas.Overlay). Nothing the scratch world does reaches the live stores, so
// `aosd replay --verify` and `aosd shadow` can run beside a running world.
func ScratchStores(s Stores, height uint64) Stores {
	if h := s.Journal.Height(); height > h {
		height = h
	}
	l := &scratchLog{base: s.Journal, height: height}
	l.tip.Advance(height)
	return Stores{CAS: cas.NewOverlay(s.CAS), Journal: l}
}

// scratchConfig is cfg for a world on ScratchStores: nothing published,
// observed or trusted, no snapshots taken, no identity journaled, and the
// journal's limits rather than the caller's.
func scratchConfig(cfg Config) Config {
	cfg.noIdentity = true
	cfg.Publisher, cfg.Observer, cfg.Keyring = nil, nil, nil
	cfg.SnapshotEvery, cfg.SnapshotInterval = -1, -1
	cfg.FromGenesis, cfg.VerifySnapshots = false, false
	cfg.Limits = Limits{}
	return cfg
}

// scratchLog is a journal view: the base up to height, then a memory tail.
type scratchLog struct {
	base   Log
	height uint64
	tip    journal.Tip

	mu   sync.Mutex
	tail []journal.Record
}

var _ Log = (*scratchLog)(nil)

func (l *scratchLog) Height() uint64 { return l.tip.Height() }

func (l *scratchLog) First() uint64 { return l.base.First() }

func (l *scratchLog) Wait(ctx context.Context, after uint64) (uint64, error) {
	return l.tip.Wait(ctx, after)
}

func (l *scratchLog) Append(recs []journal.Record) error {
	if len(recs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := journal.CheckContinues(l.tip.Height(), recs); err != nil {
		return err
	}
	for _, r := range recs {
		l.tail = append(l.tail, journal.Record{Seq: r.Seq, Kind: r.Kind, Body: append([]byte(nil), r.Body...)})
	}
	l.tip.Advance(recs[len(recs)-1].Seq)
	return nil
}

func (l *scratchLog) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	from = max(from, 1)
	more := true
	if from <= l.height {
		err := l.base.Read(from, func(r journal.Record) (bool, error) {
			if r.Seq > l.height {
				return false, nil
			}
			var err error
			more, err = fn(r)
			return more && r.Seq < l.height, err
		})
		if err != nil || !more {
			return err
		}
	}
	l.mu.Lock()
	tail := l.tail
	l.mu.Unlock()
	for _, r := range tail {
		if r.Seq < from {
			continue
		}
		if ok, err := fn(r); err != nil || !ok {
			return err
		}
	}
	return nil
}

func (l *scratchLog) Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error {
	l.mu.Lock()
	tail := l.tail
	l.mu.Unlock()
	for i := len(tail) - 1; i >= 0; i-- {
		if tail[i].Kind == k {
			if ok, err := fn(tail[i].Seq); err != nil || !ok {
				return err
			}
		}
	}
	return l.base.Marks(k, func(seq uint64) (bool, error) {
		if seq > l.height {
			return true, nil
		}
		return fn(seq)
	})
}
