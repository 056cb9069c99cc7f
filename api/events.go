package api

import (
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/internal/jsonx"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/views"
)

// eventsShape leads the answer to a POST /v1/events body that is not one.
const eventsShape = `body is not {"schema": NAME, "value": JSON, "idempotency_key"?: KEY} or an array of them`

// eventsBody is what parseEvents read of a POST /v1/events body: its
// events, whether it was a batch (an array), and the first event whose
// idempotency_key was given as "" (-1: none). A key given as "" is told
// apart from no key, and refused, but only once the request's headers are
// checked (eventsIn), so the events hold the kernel's reading of it, none.
type eventsBody struct {
	events   []Event
	batch    bool
	emptyKey int
}

// parseEvents reads a POST /v1/events body: one event object, or an array
// of them (batch). It reads the envelope once, with jsonx's scanner, and
// keeps each value as the bytes the body gives (checked against the JSON
// grammar, not parsed): the kernel parses it, once, against its schema.
// Envelope keys are exact and appear at most once; unknown ones, values
// of the wrong type and anything after the body are refused. A null event
// or a null schema or idempotency_key reads as absent, as encoding/json
// read them; a null value is the value null.
//
// A batch holds at most maxBatch events (0: no bound): the next one is
// refused as soon as it starts (batchTooLarge), before anything else of it
// is read. What jsonx refuses is worded by views.Problem.
func parseEvents(b []byte, maxBatch int) (eventsBody, error) {
	out := eventsBody{emptyKey: -1}
	var scanner jsonx.Scanner
	if err := scanner.Reset(b, jsonx.Options{MaxDepth: views.MaxDepth}); err != nil {
		return out, views.Problem(err)
	}
	sc := &scanner
	var err error
	if c, ok := sc.Peek(); ok && c == '[' {
		out.batch = true
		out.events = make([]Event, 0, 8)
		err = sc.Array("an array of events", func(i int) error {
			if maxBatch > 0 && i >= maxBatch {
				return &batchTooLarge{max: maxBatch}
			}
			out.events = append(out.events, Event{})
			if err := out.read(sc, i); err != nil {
				return fmt.Errorf("events[%d]: %w", i, err)
			}
			return nil
		})
	} else {
		out.events = make([]Event, 1)
		err = out.read(sc, 0)
	}
	if err == nil {
		err = sc.End()
	}
	if err != nil {
		return eventsBody{batch: out.batch, emptyKey: -1}, views.Problem(err)
	}
	return out, nil
}

// read reads event i of the body (readEvent), noting an empty key.
func (b *eventsBody) read(sc *jsonx.Scanner, i int) error {
	empty, err := readEvent(sc, &b.events[i])
	if empty && b.emptyKey < 0 {
		b.emptyKey = i
	}
	return err
}

// batchTooLarge refuses a POST /v1/events batch of more than max events.
// One request is one turn of the world's loop, which other clients' events
// wait behind: a batch is bounded so that the wait is (docs/DECISIONS.md).
type batchTooLarge struct{ max int }

func (e *batchTooLarge) Error() string {
	return fmt.Sprintf("a batch holds at most %d events (the server's max batch); send the rest in further requests", e.max)
}

// readEvent reads one event object (or null) of an events body into ev,
// and says whether its idempotency_key was given as "" (ev then has none).
func readEvent(sc *jsonx.Scanner, ev *Event) (emptyKey bool, err error) {
	if null, err := sc.Null(); null || err != nil {
		return false, err
	}
	var seen [3]bool // schema, value, idempotency_key
	err = sc.Object("an event object", func(key []byte, keyAt int) error {
		var err error
		field := -1
		switch string(key) {
		case "schema":
			field = 0
		case "value":
			field = 1
		case "idempotency_key":
			field = 2
		default:
			return fmt.Errorf("json: at byte %d: unknown field %q", keyAt, key)
		}
		if seen[field] {
			return sc.Duplicate(string(key), keyAt)
		}
		seen[field] = true
		switch field {
		case 0:
			var null bool
			if null, err = sc.Null(); !null && err == nil {
				ev.Schema, err = sc.String("a string")
			}
		case 1:
			ev.Value, err = sc.Skip()
		case 2:
			var null bool
			if null, err = sc.Null(); !null && err == nil {
				ev.IdempotencyKey, err = sc.String("a string")
				emptyKey = err == nil && ev.IdempotencyKey == ""
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	return emptyKey, err
}

// eventsIn settles each event's idempotency key from its body field and, for
// a single event, the Idempotency-Key header (header holds the header's
// values): both may be given if they agree; an empty key is refused.
func eventsIn(body eventsBody, header []string) ([]Event, *Error) {
	evs, batch := body.events, body.batch
	if len(header) > 0 && batch {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "Idempotency-Key header",
			"the Idempotency-Key header applies to a single event; give each event of a batch its own idempotency_key")
	}
	if len(header) > 1 {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "Idempotency-Key header",
			"%d Idempotency-Key headers; give one", len(header))
	}
	if i := body.emptyKey; i >= 0 {
		where := "idempotency_key"
		if batch {
			where = fmt.Sprintf("events[%d].idempotency_key", i)
		}
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, where,
			"idempotency_key is empty; omit it, or give 1-%d visible ASCII characters", kernel.MaxIdempotencyKeyBytes)
	}
	if len(header) == 1 {
		h := header[0]
		switch {
		case h == "":
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, "Idempotency-Key header",
				"the Idempotency-Key header is empty; omit it, or give 1-%d visible ASCII characters", kernel.MaxIdempotencyKeyBytes)
		case evs[0].IdempotencyKey != "" && evs[0].IdempotencyKey != h:
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, "Idempotency-Key header",
				"the Idempotency-Key header %q and the body's idempotency_key %q differ; give one, or the same in both", h, evs[0].IdempotencyKey)
		}
		evs[0].IdempotencyKey = h
	}
	return evs, nil
}
