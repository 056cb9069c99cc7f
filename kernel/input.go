package kernel

import "fmt"

// InputError is an ingress event refused before anything of the call is
// journaled: it says which event and which part of it, so a server can
// answer in its own terms (a status, the event's place in its request)
// without checking the input again. Its message is the kernel's, and it
// matches ErrInvalid.
type InputError struct {
	Index   int    // the event's place in the call
	Field   string // the part refused: "schema", "value" or "idempotency_key"
	Missing bool   // the part was not given at all
	Err     error  // the refusal in the kernel's words; wraps ErrInvalid
}

func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap gives the refusal, so errors.Is(err, ErrInvalid) holds.
func (e *InputError) Unwrap() error { return e.Err }

// Parts of an ingress event an InputError names.
const (
	FieldSchema         = "schema"
	FieldValue          = "value"
	FieldIdempotencyKey = "idempotency_key"
)

// checkGiven refuses a call in which an event has no schema or no value. It
// runs over the whole call before any event is validated, so the cheap
// refusal comes first whatever the events before it hold.
func checkGiven(evs []Event) error {
	for i, ev := range evs {
		switch {
		case ev.Schema == "":
			return inputError(evs, i, FieldSchema, true, fmt.Errorf("%w: event has no schema", ErrInvalid))
		case len(ev.JSON) == 0 && len(ev.CBOR) == 0:
			return inputError(evs, i, FieldValue, true, fmt.Errorf("%w: event %s has no value", ErrInvalid, ev.Schema))
		}
	}
	return nil
}

// inputError is the refusal of event i of evs; in a call of several events
// the message says which.
func inputError(evs []Event, i int, field string, missing bool, err error) *InputError {
	if len(evs) > 1 {
		err = fmt.Errorf("event %d: %w", i, err)
	}
	return &InputError{Index: i, Field: field, Missing: missing, Err: err}
}
