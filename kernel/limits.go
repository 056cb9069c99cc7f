package kernel

import (
	"context"
	"fmt"
	"reflect"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// legacyLimits are the limits replay uses for a journal written before limits
// were journaled: the defaults, without the per-input work budget (which did
// not exist, so an old journal may hold a longer cascade than it allows).
// Opening such a world journals the current limits right after replay.
func legacyLimits() Limits {
	l := limitsWithDefaults(Limits{})
	l.MaxStepsPerInput, l.MaxRecordsPerInput, l.MaxBytesPerInput = 0, 0, 0
	l.MaxParkedPerInstance = 0 // nor parking: failed instances skipped events
	return l
}

// mergeLimits lays the non-zero fields of over on l.
func mergeLimits(l, over Limits) Limits {
	dst := reflect.ValueOf(&l).Elem()
	src := reflect.ValueOf(over)
	for i := range src.NumField() {
		if f := src.Field(i); !f.IsZero() {
			dst.Field(i).Set(f)
		}
	}
	return l
}

// CheckLimits refuses negative limits (ErrInvalid), naming the field as
// JSON spells it. SetLimits checks; callers that parse limits check early.
func CheckLimits(l Limits) error {
	v := reflect.ValueOf(l)
	for i, name := range records.LimitNames() {
		if n := v.Field(i).Int(); n < 0 {
			return fmt.Errorf("%w: limit %s is %d; limits are positive (0 keeps the current value)", ErrInvalid, name, n)
		}
	}
	return nil
}

// journaledLimits are limits read from the journal (a manifest or config
// record, a snapshot) with defaults for what they leave zero, except
// MaxParkedPerInstance: zero there means the record predates parking, and
// the world replays it as it ran then, skipping the events of failed
// instances (park.go). A live change fills it like any other limit.
func journaledLimits(l Limits) Limits {
	out := limitsWithDefaults(l)
	out.MaxParkedPerInstance = l.MaxParkedPerInstance
	return out
}

// setLimits makes l (with defaults for what it leaves zero, as
// journaledLimits fills them) the limits the loop judges by, and publishes
// them to the goroutines that check ingress.
func (st *state) setLimits(l Limits) {
	st.limits = journaledLimits(l)
	cp := st.limits
	st.w.limits.Store(&cp)
}

// changeLimits journals a records.ConfigRec when l differs from the current limits.
// It returns the record's seq, or 0 when nothing changed.
func (st *state) changeLimits(l Limits) uint64 {
	return st.changeTo(limitsWithDefaults(l))
}

// changeTo journals a records.ConfigRec making l (complete) the limits, when
// it differs from the current ones; replay passes the journaled limits
// (journaledLimits), so a record from before parking keeps its bytes.
func (st *state) changeTo(l Limits) uint64 {
	if l == st.limits {
		return 0
	}
	st.setLimits(l)
	return st.emit(journal.KindConfig, schemas.MustMarshal(&records.ConfigRec{Limits: st.limits}))
}

// Limits are the limits in force.
func (w *World) Limits() Limits { return *w.limits.Load() }

// LimitsResult says what SetLimits did.
type LimitsResult struct {
	Limits  Limits
	Changed bool
	Seq     uint64 // the config record, when changed
}

// SetLimits changes the limits: fields of l that are zero keep their current
// value. A change is journaled and applies to every input after it; replay
// applies it at the same place. It returns once the change is durable.
func (w *World) SetLimits(ctx context.Context, l Limits) (*LimitsResult, error) {
	if err := CheckLimits(l); err != nil {
		return nil, err
	}
	var res LimitsResult
	err := w.do(ctx, func(st *state) {
		res.Seq = st.changeLimits(mergeLimits(st.limits, l))
		res.Changed, res.Limits = res.Seq != 0, st.limits
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// openLimits settles the limits after replay: the journal's, with the
// non-zero fields of Config.Limits laid over them and defaults for the rest.
// A world with no manifest keeps them in memory (its first apply journals
// them); otherwise a difference is journaled before Open returns.
func (w *World) openLimits() error {
	var man bool
	var want Limits
	err := w.do(context.Background(), func(st *state) {
		man = st.man != nil
		want = limitsWithDefaults(mergeLimits(st.limits, w.cfg.Limits))
		if !man {
			st.setLimits(want)
		}
	})
	if err != nil || !man {
		return err
	}
	if err := CheckLimits(w.cfg.Limits); err != nil {
		return err
	}
	_, err = w.SetLimits(context.Background(), want)
	return err
}

// DefaultLimits are the limits a new world starts with.
func DefaultLimits() Limits { return limitsWithDefaults(Limits{}) }
