package effects

import (
	"sort"
	"time"

	"github.com/aos-kernel/aos/kernel"

	"github.com/aos-kernel/aos/schemas"
)

// Holding is who holds an intent in flight here, for the pending-work
// view (GET /v1/pending): a built-in effect is run by this dispatcher; an
// external one is queued until an executor claims it, then leased to it
// until LeaseUntil (after which it is queued again).
type Holding struct {
	Builtin    bool
	LeasedTo   string    // the executor holding a live lease; "" when queued or built in
	LeaseUntil time.Time // zero unless LeasedTo
}

// Holding says who holds the intent h; ok is false when the dispatcher
// does not hold it (settled, or not published yet).
func (d *Dispatcher) Holding(h schemas.Hash) (Holding, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.pending[h]
	if e == nil {
		return Holding{}, false
	}
	_, builtin := d.cfg.Executors[e.it.Effect]
	out := Holding{Builtin: builtin}
	if e.leasedTo != "" && !d.cfg.Now().After(e.leaseEnd) {
		out.LeasedTo, out.LeaseUntil = e.leasedTo, e.leaseEnd
	}
	return out, true
}

// InFlight lists every intent this dispatcher holds (published once
// durable, dropped once settled), in the kernel's order of in-flight
// intents: by the seq of the step that opened it, then by hash. It reads
// under the dispatcher's own lock, never the kernel's loop, so listing a
// world's pending work does not wait behind its stepping or snapshots.
func (d *Dispatcher) InFlight() []kernel.OpenIntent {
	d.mu.Lock()
	out := make([]kernel.OpenIntent, 0, len(d.pending))
	for _, e := range d.pending {
		out = append(out, e.it)
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].EmittedAt != out[j].EmittedAt {
			return out[i].EmittedAt < out[j].EmittedAt
		}
		return string(out[i].Hash[:]) < string(out[j].Hash[:])
	})
	return out
}
