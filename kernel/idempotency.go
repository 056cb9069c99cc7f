package kernel

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aos-kernel/aos/records"
)

// ErrIdempotencyConflict refuses an ingress event whose idempotency key the
// world remembers for an event with another schema or value.
var ErrIdempotencyConflict = errors.New("kernel: idempotency key already used for a different event")

// MaxIdempotencyKeyBytes bounds an ingress idempotency key.
const MaxIdempotencyKeyBytes = 256

// Ingested is what became of one submitted event: its journal seq, and
// whether it was a resend of an event the world had already journaled under
// the same idempotency key (then Seq is that event's and nothing new was
// journaled).
type Ingested struct {
	Seq       uint64
	Duplicate bool
	// Parked lists the targets the event was parked for, in its targets'
	// order: instances that cannot take it now (failed, or their module
	// set aside) and will once an operator recovers or resumes them
	// (park.go). Nil when none (and for a duplicate).
	Parked []Target
}

// checkIdempotencyKey says what is wrong with a non-empty key, or nil: a key
// is 1 to MaxIdempotencyKeyBytes bytes of visible ASCII (0x21-0x7e), so it
// travels unchanged in an HTTP header, a JSON string and a shell argument.
func checkIdempotencyKey(k string) error {
	if len(k) > MaxIdempotencyKeyBytes {
		return fmt.Errorf("idempotency key %.32q... is %d bytes; at most %d", k, len(k), MaxIdempotencyKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("idempotency key %q has byte 0x%02x at offset %d; keys are visible ASCII (0x21-0x7e)", k, c, i)
		}
	}
	return nil
}

// idemID is how the table knows a key, and an event's content: the first
// 16 bytes of a SHA-256. A fixed size keeps the cost per remembered key the
// same whatever the key's length; at 128 bits, two keys (or two events under
// one key) colliding by chance is out of reach (about 2^-88 for a million
// keys), and crafting a collision takes ~2^64 work and only confuses the
// crafter's own events.
type idemID [16]byte

func idemIDOf(parts ...[]byte) idemID {
	h := sha256.New()
	for _, p := range parts {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write(p)
	}
	var id idemID
	copy(id[:], h.Sum(nil))
	return id
}

// idemKeyID identifies an idempotency key.
func idemKeyID(key string) idemID { return idemIDOf([]byte(key)) }

// idemSum identifies what an event says (schema and canonical value), for
// telling a resend from a different event reusing its key.
func idemSum(schema string, value []byte) idemID { return idemIDOf([]byte(schema), value) }

// idemEntry is what the table remembers of a keyed ingress event.
type idemEntry struct {
	seq     uint64 // the event's journal seq
	logical uint64 // its stamp's logical time
	sum     idemID // idemSum of its schema and value
}

// idemTable maps the idempotency keys of journaled ingress events to their
// events. It is a pure function of the journal: live ingress and replay
// (drive, KindEvent) update it through the same call, note, for every
// ingress event in journal order, and nothing else touches it. Eviction is
// first-in first-out in seq order, which is also logical-time order (logical
// time never decreases), so the oldest key is always at the front.
type idemTable struct {
	byKey map[idemID]idemEntry
	fifo  []idemID // keys in seq order; fifo[head:] are live, each once
	head  int
}

// lookup finds the entry of a key.
func (t *idemTable) lookup(key idemID) (idemEntry, bool) {
	e, ok := t.byKey[key]
	return e, ok
}

// len is how many keys are remembered.
func (t *idemTable) len() int { return len(t.fifo) - t.head }

// note records a journaled ingress event: its key (when it has one) is
// remembered, then keys stamped a window or more before it, and the oldest
// keys beyond the count limit, are forgotten. An event without a key still
// advances time. A key is never noted while remembered: ingress answers a
// remembered key without journaling, and replay refuses a journal that has
// one.
func (t *idemTable) note(key *idemID, e idemEntry, lim *Limits) {
	if key != nil {
		if t.byKey == nil {
			t.byKey = map[idemID]idemEntry{}
		}
		t.byKey[*key] = e
		t.fifo = append(t.fifo, *key)
	}
	window := uint64(math.MaxUint64)
	if s := uint64(lim.IdempotencyWindowSeconds); s < math.MaxUint64/uint64(time.Second) {
		window = s * uint64(time.Second)
	}
	for t.len() > 0 {
		front := t.byKey[t.fifo[t.head]]
		if t.len() <= lim.MaxIdempotencyKeys && (e.logical < window || front.logical > e.logical-window) {
			break
		}
		delete(t.byKey, t.fifo[t.head])
		t.head++
	}
	if t.head > 1024 && t.head > len(t.fifo)/2 { // keep the FIFO's dead prefix bounded
		n := copy(t.fifo, t.fifo[t.head:])
		t.fifo, t.head = t.fifo[:n], 0
	}
}

// noteIngress records the ingress event just journaled at seq in the
// idempotency table. key is nil for an event without an idempotency key;
// otherwise key and sum are idemKeyID and idemSum of the event, which live
// ingress computed off the loop (Submit) and replay computes here.
func (st *state) noteIngress(rec *records.EventRec, seq uint64, key *idemID, sum idemID) {
	e := idemEntry{seq: seq, logical: rec.Stamp.LogicalNs}
	if key != nil {
		e.sum = sum
	}
	st.idem.note(key, e, &st.limits)
}

// checkKeys refuses a request whose events reuse a remembered key, or one
// key within the request, for events that differ, before any of them is
// journaled: a conflict refuses the whole request and journals nothing.
// evs are the request's events from index from on (a request that yielded
// is checked again for the events it has not journaled yet).
func (st *state) checkKeys(evs []ingressEvent, from, total int) error {
	var first map[idemID]int // key -> index of its first event in this request
	for j := range evs {
		ev := &evs[j]
		i := from + j
		if ev.key == "" {
			continue
		}
		at := ""
		if total > 1 {
			at = fmt.Sprintf("event %d: ", i)
		}
		if e, ok := st.idem.lookup(ev.keyID); ok {
			if e.sum != ev.sum {
				return fmt.Errorf("%w: %sidempotency key %q was used by the event at seq %d, which has a different schema or value; nothing was journaled",
					ErrIdempotencyConflict, at, ev.key, e.seq)
			}
			continue
		}
		if k, ok := first[ev.keyID]; ok {
			if evs[k-from].sum != ev.sum {
				return fmt.Errorf("%w: %sidempotency key %q is also given to event %d of this request, which has a different schema or value; nothing was journaled",
					ErrIdempotencyConflict, at, ev.key, k)
			}
			continue
		}
		if first == nil {
			first = map[idemID]int{}
		}
		first[ev.keyID] = i
	}
	return nil
}

// submission is an events request under way: how far the loop got and what
// its events got so far. A request that has held the loop past its turn's
// time yields (World.loop) and goes on from here in a later turn.
type submission struct {
	next int // the first event not journaled yet
	res  result
}

// ingestEvents journals a request's events in order and runs each to idle.
// An event whose key the world remembers is answered with the seq of the
// event journaled under that key, as a duplicate, and journals nothing.
// It returns false when it yielded: the request's turn ran out of time
// with events left (they go on in a later turn, behind the requests queued
// meanwhile), and true once the request is answered in sub.res.
//
// That answer never overtakes the original's durability: the original was
// journaled by an earlier loop turn or earlier in this one, the loop hands
// the committer its turns in order over one channel, and the committer (one
// goroutine) appends them in that order, answering a turn's requests only
// after its append succeeded. Once an append fails the world is broken and
// every later turn is answered with ErrBroken; a storage failure met on the
// loop drops the whole turn unanswered-but-for-the-error and stops the loop
// (failstop.go). So no duplicate is acknowledged for an original that is not
// durable.
func (st *state) ingestEvents(evs []ingressEvent, sub *submission) bool {
	res := &sub.res
	if st.man == nil {
		res.err = ErrNoManifest
		return true
	}
	if err := st.checkKeys(evs[sub.next:], sub.next, len(evs)); err != nil {
		res.err = err
		return true
	}
	if res.seqs == nil {
		res.seqs, res.dups = make([]uint64, 0, len(evs)), make([]bool, 0, len(evs))
	}
	for i := sub.next; i < len(evs); i++ {
		if i > sub.next && st.turnOver() {
			sub.next = i
			return false
		}
		if evs[i].key != "" {
			if e, ok := st.idem.lookup(evs[i].keyID); ok {
				res.seqs, res.dups = append(res.seqs, e.seq), append(res.dups, true)
				continue
			}
		}
		seq, parked, err := st.ingestExternal(&evs[i])
		st.maybeMaterialize()
		if st.stopped != nil {
			return true // the loop answers the whole turn with the failure
		}
		if err != nil {
			if len(evs) > 1 {
				err = fmt.Errorf("event %d: %w", i, err)
			}
			res.err = err
			return true
		}
		res.seqs, res.dups = append(res.seqs, seq), append(res.dups, false)
		if parked != nil {
			if res.parked == nil {
				res.parked = make([][]Target, len(evs))
			}
			res.parked[len(res.seqs)-1] = parked
		}
	}
	sub.next = len(evs)
	return true
}

// fresh refuses, for replay, a journaled ingress event whose key the table
// remembers: live ingress would have answered it as a duplicate instead.
func (t *idemTable) fresh(key string) error {
	if key == "" {
		return nil
	}
	if e, ok := t.lookup(idemKeyID(key)); ok {
		return fmt.Errorf("idempotency key %q is remembered from seq %d, so ingress would have answered this event as a duplicate", key, e.seq)
	}
	return nil
}
