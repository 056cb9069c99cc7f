package kernel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Event is one event offered at ingress.
type Event struct {
	Schema string
	// Exactly one of JSON and CBOR: the value as JSON (validated and converted
	// through the schema) or as canonical CBOR.
	JSON json.RawMessage
	CBOR []byte
}

type ingressEvent struct {
	schema   string
	value    []byte
	manifest *manifest.Manifest // validated and routed against
	targets  []routing.Target   // routed by the caller; valid while manifest is current
}

// Submit validates, canonicalizes, stamps and journals events in order and
// runs each to idle. It returns their journal seqs once they are durable.
// If an event is refused, the events before it stand (they were durable) and
// nothing of it or after it is journaled; the error says which one and why.
func (w *World) Submit(ctx context.Context, evs ...Event) ([]uint64, error) {
	cur := w.current.Load()
	if cur == nil {
		return nil, ErrNoManifest
	}
	in := make([]ingressEvent, len(evs))
	for i, ev := range evs {
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
			if len(evs) > 1 {
				return nil, fmt.Errorf("event %d: %w", i, err)
			}
			return nil, err
		}
		in[i].schema, in[i].value, in[i].manifest = ev.Schema, v, cur.m
	}
	res, err := w.send(ctx, request{events: in})
	return res.seqs, err
}

// canonicalEvent does the expensive validation outside the loop, so many
// clients validate in parallel.
func (w *World) canonicalEvent(m *manifest.Manifest, ev Event) ([]byte, error) {
	lim := w.cfg.Limits.MaxEventBytes
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
	case ev.CBOR != nil:
		if len(ev.CBOR) > lim {
			return nil, fmt.Errorf("%w: event %s: %d bytes exceeds the %d-byte limit", ErrInvalid, ev.Schema, len(ev.CBOR), lim)
		}
		if err := m.Registry.Validate(ev.Schema, ev.CBOR); err != nil {
			return nil, fmt.Errorf("%w: event %s: %v", ErrInvalid, ev.Schema, err)
		}
		return ev.CBOR, nil
	default:
		return nil, fmt.Errorf("%w: event %s has no value", ErrInvalid, ev.Schema)
	}
}

// ingestExternal journals one ingress event and runs the world to idle.
func (st *state) ingestExternal(ev *ingressEvent) (uint64, error) {
	if st.man == nil {
		return 0, ErrNoManifest
	}
	targets := ev.targets
	if ev.manifest != st.man {
		// The manifest changed since the caller validated: validate and route
		// again.
		if !st.man.Registry.Has(ev.schema) {
			return 0, fmt.Errorf("%w: unknown event schema %q", ErrInvalid, ev.schema)
		}
		if err := st.man.Registry.Validate(ev.schema, ev.value); err != nil {
			return 0, fmt.Errorf("%w: event %s: %v", ErrInvalid, ev.schema, err)
		}
		var err error
		if targets, err = st.router.Route(ev.schema, ev.value); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	seq := st.emitEvent(&EventRec{Schema: ev.schema, Value: ev.value, Stamp: st.newStamp()}, targets, 0)
	st.w.cfg.Observer.Ingested(1)
	st.runToIdle()
	return seq, nil
}

// newStamp takes time and entropy from the ports; the only place they enter.
func (st *state) newStamp() Stamp {
	now := st.w.cfg.Clock.NowNs()
	logical := now
	if logical <= st.logical {
		logical = st.logical + 1
	}
	ent := make([]byte, 32)
	st.w.cfg.Entropy.Fill(ent)
	return Stamp{NowNs: now, LogicalNs: logical, Entropy: ent, Height: st.seq, ManifestHash: st.man.Hash}
}

// childStamp is the stamp of an event a step emits: the parent's time, and
// entropy derived by hashing, so the cascade needs no port.
func childStamp(parent *Stamp, seq uint64) Stamp {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], seq)
	h := schemas.HashBytes(append(append([]byte(nil), parent.Entropy...), buf[:]...))
	return Stamp{NowNs: parent.NowNs, LogicalNs: parent.LogicalNs, Entropy: h[:],
		Height: seq - 1, ManifestHash: parent.ManifestHash}
}

// emitEvent journals an event with its targets and delivers it to their
// mailboxes. Returns its seq.
func (st *state) emitEvent(rec *EventRec, targets []routing.Target, depth uint64) uint64 {
	rec.Targets = make([]TargetRec, len(targets))
	for i, t := range targets {
		rec.Targets[i] = TargetRec{Workflow: t.Workflow, Key: t.Key}
	}
	body := encodeEvent(rec)
	seq := st.emit(journal.KindEvent, body)
	if rec.LogicalNs() > st.logical {
		st.logical = rec.LogicalNs()
	}
	eh := schemas.HashBytes(body)
	stamp := rec.Stamp
	for _, t := range targets {
		inst := st.instance(t.Workflow, t.Key)
		if inst.failed {
			continue // sticky failure: the event is journaled, the instance does not step
		}
		inst.mailbox = append(inst.mailbox, delivery{seq: seq, schema: t.Schema, value: t.Value,
			stamp: &stamp, eventHash: eh, depth: depth})
		if !inst.queued && !st.replaying {
			inst.queued = true
			st.ready = append(st.ready, inst)
		}
	}
	return seq
}

// LogicalNs is the event's logical time.
func (r *EventRec) LogicalNs() uint64 { return r.Stamp.LogicalNs }

// emit assigns the next seq to a record and queues it for the committer.
func (st *state) emit(kind journal.Kind, body []byte) uint64 {
	st.seq++
	st.out = append(st.out, journal.Record{Seq: st.seq, Kind: kind, Body: body})
	return st.seq
}
