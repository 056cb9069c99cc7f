package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/kernel"
)

// eventWire is EventIn as a request body spells it: a key given as "" is
// told apart from no key, and refused.
type eventWire struct {
	Schema         string          `json:"schema"`
	Value          json.RawMessage `json:"value"`
	IdempotencyKey *string         `json:"idempotency_key"`
}

// eventsIn settles each event's idempotency key from its body field and, for
// a single event, the Idempotency-Key header (header holds the header's
// values): both may be given if they agree; an empty key is refused.
func eventsIn(wire []eventWire, batch bool, header []string) ([]EventIn, *Error) {
	if len(header) > 0 && batch {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "Idempotency-Key header",
			"the Idempotency-Key header applies to a single event; give each event of a batch its own idempotency_key")
	}
	if len(header) > 1 {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "Idempotency-Key header",
			"%d Idempotency-Key headers; give one", len(header))
	}
	evs := make([]EventIn, len(wire))
	for i, ev := range wire {
		evs[i] = EventIn{Schema: ev.Schema, Value: ev.Value}
		where := "idempotency_key"
		if batch {
			where = fmt.Sprintf("events[%d].idempotency_key", i)
		}
		if ev.IdempotencyKey != nil {
			if *ev.IdempotencyKey == "" {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, where,
					"idempotency_key is empty; omit it, or give 1-%d visible ASCII characters", kernel.MaxIdempotencyKeyBytes)
			}
			evs[i].IdempotencyKey = *ev.IdempotencyKey
		}
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
