package effects

import (
	"time"

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
