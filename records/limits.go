package records

import (
	"reflect"
	"strings"
)

// Limits bound what one step may produce, what one external input may cause,
// and what ingress accepts. They shape the journal (a limit decides whether
// a step faults, and with which reason), so they are part of the world: the
// limits in force are journaled with each manifest and with every change
// (kernel/limits.go), replay uses the journaled ones, and Config.Limits only asks
// for a change. Every field is tagged omitempty so a field added later
// leaves older records' bytes alone; zero means the default.
type Limits struct {
	MaxEffects      int `cbor:"max_effects,omitempty"`       // effects per step (default 16)
	MaxDomainEvents int `cbor:"max_domain_events,omitempty"` // events emitted per step (default 64)
	MaxOutputBytes  int `cbor:"max_output_bytes,omitempty"`  // state + emitted values + params per step (default 1 MiB)
	MaxEventBytes   int `cbor:"max_event_bytes,omitempty"`   // one ingress event, JSON or CBOR (default 256 KiB)
	MaxCascadeDepth int `cbor:"max_cascade_depth,omitempty"` // emitted-event generations per external input (default 64)
	// Work one external input (an ingress event, a receipt, a stream frame)
	// may cause before the instances still holding its work are failed with
	// a budget fault (budget.go): steps run, journal records written, and
	// their bytes. Defaults 10,000 steps, 50,000 records, 64 MiB.
	MaxStepsPerInput   int `cbor:"max_steps_per_input,omitempty"`
	MaxRecordsPerInput int `cbor:"max_records_per_input,omitempty"`
	MaxBytesPerInput   int `cbor:"max_bytes_per_input,omitempty"`
	// How long and how many ingress idempotency keys are remembered
	// (idempotency.go): a key is forgotten once an ingress event stamped
	// this many seconds of journaled (logical) time after it is journaled,
	// or once this many newer keys are remembered, oldest first. Defaults
	// 86,400 s (24 h) and 1,000,000 keys.
	IdempotencyWindowSeconds int `cbor:"idempotency_window_seconds,omitempty"`
	MaxIdempotencyKeys       int `cbor:"max_idempotency_keys,omitempty"`
	// What one trusted executor can make the journal grow by (fence.go):
	// stream frames journaled per intent (default 1,024) and the bytes of
	// one frame's payload (default 64 KiB); beyond either a frame is
	// refused and nothing is journaled.
	MaxFramesPerIntent int `cbor:"max_frames_per_intent,omitempty"`
	MaxFrameBytes      int `cbor:"max_frame_bytes,omitempty"`
	// Settled intents remembered so that one late receipt for each is
	// journaled as a drop and further copies are refused as duplicates
	// (default 65,536, about 12 MiB: see fence.go). A receipt for an intent
	// settled longer ago is refused as unknown, journaling nothing.
	MaxSettledIntents int `cbor:"max_settled_intents,omitempty"`
	// Events kept for one instance that cannot take them now (failed, or
	// its module set aside), in journal order, until an operator recovers
	// or resumes it (default 1,000; kernel/park.go). Ingress that would
	// park more is refused, journaling nothing; a step that would emit
	// more faults. Zero in a journaled record means the record predates
	// parking: events for a failed instance were skipped then, and replay
	// skips them the same way.
	MaxParkedPerInstance int `cbor:"max_parked_per_instance,omitempty"`
}

// LimitNames are the names of the limits, in declaration order: the keys
// they are journaled under, which the API, the CLI and error messages use
// too (the daemon's JSON view of Limits is held to them by its tests).
func LimitNames() []string {
	t := reflect.TypeFor[Limits]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i], _, _ = strings.Cut(t.Field(i).Tag.Get("cbor"), ",")
	}
	return out
}

// NonZero is l's non-zero fields by name (LimitNames), the form SetLimits
// requests travel in.
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
