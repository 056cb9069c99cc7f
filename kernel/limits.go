package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// ConfigRec is a change of the world's limits, journaled when an operator
// sets them (World.SetLimits, `aosd limits set`) or when a world opens with
// Config.Limits asking for other values than the journal's. Limits journaled
// with a manifest record (ManifestRec.Limits) need no ConfigRec.
type ConfigRec struct {
	Limits Limits `cbor:"limits" json:"limits"`
}

// legacyLimits are the limits replay uses for a journal written before limits
// were journaled: the defaults, without the per-input work budget (which did
// not exist, so an old journal may hold a longer cascade than it allows).
// Opening such a world journals the current limits right after replay.
func legacyLimits() Limits {
	l := Limits{}.withDefaults()
	l.MaxStepsPerInput, l.MaxRecordsPerInput, l.MaxBytesPerInput = 0, 0, 0
	return l
}

// merge lays the non-zero fields of over on l.
func (l Limits) merge(over Limits) Limits {
	dst := reflect.ValueOf(&l).Elem()
	src := reflect.ValueOf(over)
	for i := range src.NumField() {
		if f := src.Field(i); !f.IsZero() {
			dst.Field(i).Set(f)
		}
	}
	return l
}

// check refuses negative limits, naming the field as JSON spells it.
func (l Limits) check() error {
	v := reflect.ValueOf(l)
	for i, name := range LimitNames() {
		if n := v.Field(i).Int(); n < 0 {
			return fmt.Errorf("%w: limit %s is %d; limits are positive (0 keeps the current value)", ErrInvalid, name, n)
		}
	}
	return nil
}

// LimitNames are the JSON names of the limits, in declaration order.
func LimitNames() []string {
	t := reflect.TypeFor[Limits]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return out
}

// ParseLimits reads limits from JSON ({"max_steps_per_input": 100, ...}),
// refusing unknown names: a misspelt limit must not be silently ignored.
func ParseLimits(b []byte) (Limits, error) {
	var l Limits
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Limits{}, fmt.Errorf("%w: limits: %v (known limits: %v)", ErrInvalid, err, LimitNames())
	}
	if err := l.check(); err != nil {
		return Limits{}, err
	}
	return l, nil
}

// setLimits makes l (with defaults for what it leaves zero) the limits the
// loop judges by, and publishes them to the goroutines that check ingress.
func (st *state) setLimits(l Limits) {
	st.limits = l.withDefaults()
	cp := st.limits
	st.w.limits.Store(&cp)
}

// changeLimits journals a ConfigRec when l differs from the current limits.
// It returns the record's seq, or 0 when nothing changed.
func (st *state) changeLimits(l Limits) uint64 {
	l = l.withDefaults()
	if l == st.limits {
		return 0
	}
	st.setLimits(l)
	return st.emit(journal.KindConfig, schemas.MustMarshal(&ConfigRec{Limits: st.limits}))
}

// Limits are the limits in force.
func (w *World) Limits() Limits { return *w.limits.Load() }

// LimitsResult says what SetLimits did.
type LimitsResult struct {
	Limits  Limits `json:"limits"`
	Changed bool   `json:"changed"`
	Seq     uint64 `json:"seq,omitempty"` // the config record, when changed
}

// SetLimits changes the limits: fields of l that are zero keep their current
// value. A change is journaled and applies to every input after it; replay
// applies it at the same place. It returns once the change is durable.
func (w *World) SetLimits(ctx context.Context, l Limits) (*LimitsResult, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	var res LimitsResult
	err := w.do(ctx, func(st *state) {
		res.Seq = st.changeLimits(st.limits.merge(l))
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
		want = st.limits.merge(w.cfg.Limits).withDefaults()
		if !man {
			st.setLimits(want)
		}
	})
	if err != nil || !man {
		return err
	}
	if err := w.cfg.Limits.check(); err != nil {
		return err
	}
	_, err = w.SetLimits(context.Background(), want)
	return err
}

// NonZero is l as a JSON-ready map of its non-zero fields only, the form
// SetLimits requests travel in.
func (l Limits) NonZero() map[string]int {
	out := map[string]int{}
	v := reflect.ValueOf(l)
	names := LimitNames()
	for i := range v.NumField() {
		if n := v.Field(i).Int(); n != 0 {
			out[names[i]] = int(n)
		}
	}
	return out
}

// DefaultLimits are the limits a new world starts with.
func DefaultLimits() Limits { return Limits{}.withDefaults() }
