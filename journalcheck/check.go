package journalcheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// Journal is what the check reads: the seqs the journal holds, a range
// read, and the kind index a cut journal's snapshot is found through
// (kernel.Log, the backends' journals and journal.Memory have them all).
type Journal interface {
	// First is the lowest seq the journal holds: 1, unless retention
	// dropped the records before it.
	First() uint64
	// Read calls fn with each record from seq from on, in order, until fn
	// says stop or the records end.
	Read(from uint64, fn func(journal.Record) (bool, error)) error
	// Marks calls fn with the seqs of the records of an indexed kind,
	// newest first, without reading the journal.
	Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error
}

// Defaults of Options.
const (
	DefaultMaxViolations   = 1000
	DefaultRememberSettled = 1 << 16
)

// Options tune a check. The zero value checks a journal that starts at
// seq 1.
type Options struct {
	// Objects reads an object of the world's CAS. The check needs it only
	// for a journal that starts after a dropped prefix: it then starts from
	// the state of the oldest usable snapshot the journal still names
	// (start.go). Without it such a journal is an error.
	Objects func(schemas.Hash) ([]byte, error)
	// MaxViolations is how many violations a report lists (0:
	// DefaultMaxViolations); Report.Omitted counts the rest.
	MaxViolations int
	// RememberSettled is how many settled intents the check remembers, the
	// most recent ones, to tell a second receipt or a receipt after a
	// failure from a receipt for an intent never opened (0:
	// DefaultRememberSettled). It bounds memory; it never hides a
	// violation, only words it as receipt-unknown-intent.
	RememberSettled int
}

// Violation is one broken rule.
type Violation struct {
	Seq      uint64 // the record that breaks the rule
	Rule     string // a Rule* id
	Workflow string // the instance concerned, when there is one
	Key      []byte // its key (canonical CBOR; nil for none or an unkeyed workflow)
	Detail   string // one sentence saying what is wrong
}

func (v Violation) String() string {
	return fmt.Sprintf("seq %d %s: %s", v.Seq, v.Rule, v.Detail)
}

// Report is what a check found.
type Report struct {
	// First is the journal's first seq (1 unless retention dropped a
	// prefix); From and To the first and last seq checked (From is after
	// the checkpoint of Snapshot when the check started from one; To is 0
	// when nothing was checked).
	First, From, To uint64
	// Records is how many records were checked.
	Records uint64
	// Snapshot is the seq of the snapshot record whose state the check
	// started from (0: from genesis).
	Snapshot uint64
	// Violations, ordered by seq, then rule; at most Options.MaxViolations.
	Violations []Violation
	// Omitted is how many more violations were found and not listed.
	Omitted int
}

// OK says whether the journal keeps every rule.
func (r *Report) OK() bool { return len(r.Violations) == 0 && r.Omitted == 0 }

// Check reads the journal once, in order, and reports every record that
// breaks a rule (rules.go). It re-runs no workflow: it checks the
// journal's own structure (what consumed what, which intent is pending,
// which instance is failed), keeping in memory only what is live at each
// point: instances with deliveries, intents or a failure, and a bounded
// memory of settled intents. An error is returned only when the journal
// cannot be read at all (or ctx ends); a journal the store serves as
// corrupt is reported as RuleUnreadable.
func Check(ctx context.Context, j Journal, opt Options) (*Report, error) {
	if opt.MaxViolations <= 0 {
		opt.MaxViolations = DefaultMaxViolations
	}
	if opt.RememberSettled <= 0 {
		opt.RememberSettled = DefaultRememberSettled
	}
	c := newChecker(opt)
	first := max(j.First(), 1)
	c.rep.First = first
	from := first
	if first > 1 {
		st, err := findStart(ctx, j, first, opt)
		if err != nil {
			return nil, err
		}
		if st.state == nil {
			c.add(Violation{Seq: first, Rule: RuleTruncated, Detail: st.why})
			return c.finish(ctx, j), nil
		}
		c.seed(st.state)
		c.rep.Snapshot = st.snapshot
		from = st.state.Height + 1
	}
	c.rep.From, c.prev = from, from-1
	n := 0
	err := j.Read(from, func(r journal.Record) (bool, error) {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return false, err
			}
		}
		c.record(r)
		return true, nil
	})
	switch {
	case errors.Is(err, journal.ErrCorrupt):
		// What follows cannot be read, so the journal's end is not known:
		// nothing is judged at it.
		c.add(Violation{Seq: c.prev + 1, Rule: RuleUnreadable, Detail: fmt.Sprintf("the store cannot read the journal after seq %d: %v", c.prev, err)})
	case err != nil:
		return nil, fmt.Errorf("journalcheck: read the journal from seq %d: %w", c.prev+1, err)
	default:
		c.end()
	}
	return c.finish(ctx, j), nil
}

// finish classifies the step inputs that were not in their mailbox (was it
// a drop?), orders the violations and fills in the report.
func (c *checker) finish(ctx context.Context, j Journal) *Report {
	for _, l := range c.lookups {
		c.add(c.classify(ctx, j, l))
	}
	rep := c.rep
	slices.SortStableFunc(rep.Violations, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Rule, b.Rule))
	})
	if rep.Records > 0 {
		rep.To = c.prev
	}
	if rep.Violations == nil {
		rep.Violations = []Violation{}
	}
	return rep
}

// add lists a violation, or counts it once the list is full.
func (c *checker) add(v Violation) {
	if len(c.rep.Violations) >= c.opt.MaxViolations {
		c.rep.Omitted++
		return
	}
	c.rep.Violations = append(c.rep.Violations, v)
}
