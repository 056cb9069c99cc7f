package kernel

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Event is one event offered at ingress.
type Event struct {
	Schema string
	// Exactly one of JSON and CBOR: the value as JSON (validated and converted
	// through the schema) or as canonical CBOR.
	JSON []byte
	CBOR []byte
	// IdempotencyKey, when not empty, makes a resend safe: an event submitted
	// with a key the world remembers (idempotency.go; Limits bound how long)
	// is not journaled again, and the answer is the original's seq, marked
	// as a duplicate; the same key with another schema or value is refused
	// with ErrIdempotencyConflict. 1-256 bytes of visible ASCII.
	IdempotencyKey string
}

type ingressEvent struct {
	schema   string
	value    []byte
	key      string             // idempotency key, "" for none
	keyID    idemID             // idemKeyID(key), when key is set
	sum      idemID             // idemSum(schema, value), when key is set
	manifest *manifest.Manifest // validated and routed against
	targets  []routing.Target   // routed by the caller; valid while manifest is current
}

// Submit validates, canonicalizes, stamps and journals events in order and
// runs each to idle. It returns their journal seqs once they are durable.
// If an event is refused, the events before it stand (they were durable) and
// nothing of it or after it is journaled; the error says which one and why.
// An idempotency key the world remembers gives the original event's seq and
// journals nothing (Ingest says which events those were); a key conflict
// refuses the whole call before anything is journaled.
func (w *World) Submit(ctx context.Context, evs ...Event) ([]uint64, error) {
	res, err := w.submit(ctx, evs)
	return res.seqs, err
}

// Ingest is Submit, saying for each event whether it was a duplicate: a
// resend under an idempotency key the world remembers, answered with the
// original event's seq and not journaled again.
func (w *World) Ingest(ctx context.Context, evs ...Event) ([]Ingested, error) {
	res, err := w.submit(ctx, evs)
	out := make([]Ingested, len(res.seqs))
	for i, seq := range res.seqs {
		out[i] = Ingested{Seq: seq, Duplicate: res.dups[i]}
		if res.parked != nil {
			out[i].Parked = res.parked[i]
		}
	}
	return out, err
}

func (w *World) submit(ctx context.Context, evs []Event) (result, error) {
	if err := checkGiven(evs); err != nil {
		return result{}, err
	}
	cur := w.current.Load()
	if cur == nil {
		return result{}, ErrNoManifest
	}
	in := make([]ingressEvent, len(evs))
	for i, ev := range evs {
		if ev.IdempotencyKey != "" {
			if err := checkIdempotencyKey(ev.IdempotencyKey); err != nil {
				return result{}, &InputError{Index: i, Field: FieldIdempotencyKey,
					Err: fmt.Errorf("%w: event %d (%s): %v", ErrInvalid, i, ev.Schema, err)}
			}
		}
		field := FieldValue
		if !cur.m.Registry.Has(ev.Schema) {
			field = FieldSchema
		}
		v, err := w.canonicalEvent(cur.m, ev)
		if err == nil {
			// Routing is a pure function of (manifest, schema, value), so it
			// runs here, in parallel across callers; the loop reuses the
			// targets unless the manifest changed meanwhile.
			in[i].targets, err = cur.r.Route(ev.Schema, v)
			if err != nil {
				err = fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		if err != nil {
			return result{}, inputError(evs, i, field, false, err)
		}
		in[i].schema, in[i].value, in[i].manifest = ev.Schema, v, cur.m
		if ev.IdempotencyKey != "" {
			in[i].key, in[i].keyID, in[i].sum = ev.IdempotencyKey, idemKeyID(ev.IdempotencyKey), idemSum(ev.Schema, v)
		}
	}
	return w.send(ctx, request{events: in})
}

// canonicalEvent does the expensive validation outside the loop, so many
// clients validate in parallel.
func (w *World) canonicalEvent(m *manifest.Manifest, ev Event) ([]byte, error) {
	lim := w.Limits().MaxEventBytes
	if !m.Registry.Has(ev.Schema) {
		return nil, fmt.Errorf("%w: unknown event schema %q", ErrInvalid, ev.Schema)
	}
	switch {
	case ev.JSON != nil && ev.CBOR != nil:
		return nil, fmt.Errorf("%w: event %s: give the value as JSON or CBOR, not both", ErrInvalid, ev.Schema)
	case ev.JSON != nil:
		if len(ev.JSON) > lim {
			return nil, fmt.Errorf("%w: event %s: %d bytes exceeds the %d-byte limit", ErrInvalid, ev.Schema, len(ev.JSON), lim)
		}
		v, err := m.Registry.FromJSON(ev.Schema, ev.JSON)
		if err != nil {
			return nil, fmt.Errorf("%w: event %s: %v", ErrInvalid, ev.Schema, err)
		}
		if len(v) > lim {
			return nil, fmt.Errorf("%w: event %s: %d bytes exceeds the %d-byte limit", ErrInvalid, ev.Schema, len(v), lim)
		}
		return v, nil
	default: // CBOR: checkGiven refused an event with neither
		if len(ev.CBOR) > lim {
			return nil, fmt.Errorf("%w: event %s: %d bytes exceeds the %d-byte limit", ErrInvalid, ev.Schema, len(ev.CBOR), lim)
		}
		if err := m.Registry.Validate(ev.Schema, ev.CBOR); err != nil {
			return nil, fmt.Errorf("%w: event %s: %v", ErrInvalid, ev.Schema, err)
		}
		return ev.CBOR, nil
	}
}

// ingestExternal journals one ingress event and runs the world to idle.
// It returns the event's seq and the targets it was parked for. An event
// that would park beyond the limit is refused, journaling nothing.
func (st *state) ingestExternal(ev *ingressEvent) (uint64, []Target, error) {
	if st.man == nil {
		return 0, nil, ErrNoManifest
	}
	targets := ev.targets
	if ev.manifest != st.man {
		// The manifest changed since the caller validated: validate and route
		// again.
		if !st.man.Registry.Has(ev.schema) {
			return 0, nil, fmt.Errorf("%w: unknown event schema %q", ErrInvalid, ev.schema)
		}
		if err := st.man.Registry.Validate(ev.schema, ev.value); err != nil {
			return 0, nil, fmt.Errorf("%w: event %s: %v", ErrInvalid, ev.schema, err)
		}
		var err error
		if targets, err = st.router.Route(ev.schema, ev.value); err != nil {
			return 0, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if in, n, _ := st.fullTarget(targets, nil); in != nil {
		return 0, nil, st.refuseParked(ev.schema, in, n)
	}
	targets, perr := st.underPins(st.cur, ev.schema, ev.value, targets)
	if perr != nil {
		return 0, nil, perr
	}
	st.beginInput()
	rec := &records.EventRec{Schema: ev.schema, Value: ev.value, Stamp: st.newStamp(), IdempotencyKey: ev.key}
	seq, parked := st.emitEvent(rec, targets, 0)
	if ev.key != "" {
		st.noteIngress(rec, seq, &ev.keyID, ev.sum)
	} else {
		st.noteIngress(rec, seq, nil, idemID{})
	}
	st.w.cfg.Observer.Ingested(1)
	st.runToIdle()
	return seq, parked, nil
}

// newStamp takes time and entropy from the ports; the only place they enter.
func (st *state) newStamp() records.Stamp {
	now := st.w.cfg.Clock.NowNs()
	logical := now
	if logical <= st.logical {
		logical = st.logical + 1
	}
	ent := make([]byte, 32)
	st.w.cfg.Entropy.Fill(ent)
	return records.Stamp{NowNs: now, LogicalNs: logical, Entropy: ent, Height: st.seq, ManifestHash: st.man.Hash}
}

// childStamp is the stamp of an event a step emits: the parent's time, and
// entropy derived by hashing, so the cascade needs no port.
func childStamp(parent *records.Stamp, seq uint64) records.Stamp {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], seq)
	h := schemas.HashBytes(append(append([]byte(nil), parent.Entropy...), buf[:]...))
	return records.Stamp{NowNs: parent.NowNs, LogicalNs: parent.LogicalNs, Entropy: h[:],
		Height: seq - 1, ManifestHash: parent.ManifestHash}
}

// emitEvent journals an event with its targets and delivers it to their
// mailboxes, or parks it for those that cannot take it now (park.go).
// Returns its seq, and the targets it was parked for (nil for none).
func (st *state) emitEvent(rec *records.EventRec, targets []routing.Target, depth uint64) (uint64, []Target) {
	rec.Targets = make([]records.TargetRec, len(targets))
	for i, t := range targets {
		rec.Targets[i] = records.TargetRec{Workflow: t.Workflow, Key: t.Key}
	}
	body := records.EncodeEvent(rec)
	seq := st.emit(journal.KindEvent, body)
	if rec.Stamp.LogicalNs > st.logical {
		st.logical = rec.Stamp.LogicalNs
	}
	eh := schemas.HashBytes(body)
	stamp := rec.Stamp
	var parked []Target
	for _, t := range targets {
		inst := st.instance(t.Workflow, t.Key)
		d := delivery{seq: seq, schema: t.Schema, value: t.Value, stamp: &stamp, eventHash: eh, depth: depth}
		if st.holds(inst) {
			// Failed, or its module set aside: the event is journaled
			// and waits for it (or, under limits from before parking, a
			// failed instance skips it).
			if st.park(inst, d) {
				parked = append(parked, Target{Workflow: t.Workflow, Key: t.Key})
			}
			continue
		}
		inst.mailbox = append(inst.mailbox, d)
		if !inst.queued && !st.replaying {
			inst.queued = true
			st.ready = append(st.ready, inst)
		}
	}
	return seq, parked
}

// emit assigns the next seq to a record and queues it for the committer.
func (st *state) emit(kind journal.Kind, body []byte) uint64 {
	st.work.records++
	st.work.bytes += len(body)
	st.outBytes += len(body)
	st.seq++
	st.out = append(st.out, journal.Record{Seq: st.seq, Kind: kind, Body: body})
	return st.seq
}
