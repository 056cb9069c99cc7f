package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// GET /v1/pending: everything in flight, a page at a time, oldest first
// (by the seq of the step that opened it, then hash): each intent's
// effect, the cell that opened it, a timer's due time, and who holds it
// (run here by a built-in executor, queued for an external one, or leased
// to one until when). The inspector's pending-work view reads it.

// Pending page sizes.
const (
	DefaultPendingPage = 50
	MaxPendingPage     = 1000
)

// PendingIntent is one intent in flight.
type PendingIntent struct {
	Hash      string          `json:"hash"`
	Effect    string          `json:"effect"`
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key,omitempty"` // absent for an unkeyed workflow
	IssuerRef string          `json:"issuer_ref,omitempty"`
	EmittedAt uint64          `json:"emitted_at"` // the step that opened it
	// DueNs is a sys/timer.set@1's deliver_at_ns: when it fires, in the
	// world's logical time.
	DueNs uint64 `json:"due_ns,omitempty"`
	// State is "timer" (a built-in timer waiting for its time), "running"
	// (another built-in effect this daemon runs, retries included),
	// "queued" (waiting for an external executor to claim it) or "claimed"
	// (Executor holds a lease on it until LeaseUntil).
	State      string     `json:"state"`
	Executor   string     `json:"executor,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
}

// PendingPage is a page of GET /v1/pending. Total counts the intents the
// filters select; Next, present when more follow, is the after of the
// next page.
type PendingPage struct {
	Intents []PendingIntent `json:"intents"`
	Total   int             `json:"total"`
	Next    string          `json:"next,omitempty"`
}

func (s *Server) pendingRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "pending", body{}, func() (any, error) {
		q := r.URL.Query()
		limit := DefaultPendingPage
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > MaxPendingPage {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit", "limit %q: want 0 (for %d) to %d", v, DefaultPendingPage, MaxPendingPage)
			}
			if n > 0 {
				limit = n
			}
		}
		after, err := parsePendingCursor(q.Get("after"))
		if err != nil {
			return nil, err
		}
		return s.pending(r.Context(), q.Get("effect"), q.Get("workflow"), after, limit)
	})
}

// pendingCursor is a position in the order of GET /v1/pending.
type pendingCursor struct {
	seq  uint64
	hash schemas.Hash
	set  bool
}

// parsePendingCursor reads "SEQ-HEX" (a page's next).
func parsePendingCursor(v string) (pendingCursor, error) {
	if v == "" {
		return pendingCursor{}, nil
	}
	bad := newError(http.StatusBadRequest, CodeInvalidInput, "after", "after %q is not a page's next (SEQ-HASHHEX)", v)
	seqText, hx, found := strings.Cut(v, "-")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !found || err != nil || len(hx) != 64 {
		return pendingCursor{}, bad
	}
	var c pendingCursor
	if _, err := hex.Decode(c.hash[:], []byte(hx)); err != nil {
		return pendingCursor{}, bad
	}
	c.seq, c.set = seq, true
	return c, nil
}

func (c pendingCursor) String() string { return fmt.Sprintf("%d-%x", c.seq, c.hash[:]) }

// before says whether it comes at or before c in the page order.
func (c pendingCursor) covers(it *kernel.OpenIntent) bool {
	if !c.set {
		return false
	}
	if it.EmittedAt != c.seq {
		return it.EmittedAt < c.seq
	}
	return string(it.Hash[:]) <= string(c.hash[:])
}

func (s *Server) pending(ctx context.Context, effect, workflow string, after pendingCursor, limit int) (*PendingPage, error) {
	x := s.Executors
	// The dispatcher holds every intent in flight, in the kernel's order
	// (by emitted_at, then hash), under its own lock: reading it never
	// waits behind the kernel's loop (a step, a snapshot).
	var its []kernel.OpenIntent
	if x.Dispatcher != nil {
		its = x.Dispatcher.InFlight()
	} else {
		var err error
		if its, err = x.W.PendingIntents(ctx); err != nil {
			return nil, AsError(err, "pending")
		}
	}
	page := &PendingPage{Intents: []PendingIntent{}}
	// The first intent after the cursor: the list is in cursor order.
	start := sort.Search(len(its), func(i int) bool { return !after.covers(&its[i]) })
	for i := range its {
		it := &its[i]
		if (effect != "" && it.Effect != effect) || (workflow != "" && it.OriginWorkflow != workflow) {
			continue
		}
		page.Total++
		if i < start {
			continue
		}
		if len(page.Intents) == limit {
			if page.Next == "" {
				last := page.Intents[limit-1]
				h, _ := schemas.ParseHash(last.Hash)
				page.Next = pendingCursor{seq: last.EmittedAt, hash: h, set: true}.String()
			}
			continue
		}
		page.Intents = append(page.Intents, x.pendingRow(it))
	}
	return page, nil
}

// pendingRow describes one intent in flight.
func (x *Executors) pendingRow(it *kernel.OpenIntent) PendingIntent {
	row := PendingIntent{Hash: it.Hash.String(), Effect: it.Effect, Workflow: it.OriginWorkflow, IssuerRef: it.IssuerRef, EmittedAt: it.EmittedAt, State: "queued"}
	if len(it.OriginKey) > 0 {
		row.Key = json.RawMessage(records.KeyJSON(it.OriginKey))
	}
	if it.Effect == sys.EffectTimerSet {
		var p sys.TimerSetParams
		if schemas.Unmarshal(it.Params, &p) == nil {
			row.DueNs = p.DeliverAtNs
		}
	}
	if x.Dispatcher == nil {
		return row
	}
	hold, ok := x.Dispatcher.Holding(it.Hash)
	switch {
	case !ok:
	case hold.Builtin && it.Effect == sys.EffectTimerSet:
		row.State, row.Executor = "timer", "builtin"
	case hold.Builtin:
		row.State, row.Executor = "running", "builtin"
	case hold.LeasedTo != "":
		until := hold.LeaseUntil.UTC()
		row.State, row.Executor, row.LeaseUntil = "claimed", hold.LeasedTo, &until
	}
	return row
}
