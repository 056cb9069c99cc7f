package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/kernel"
)

// TestInputError: every ingress refusal is a *kernel.InputError naming the
// event and the part refused (so servers need not check again), matching
// ErrInvalid, with the kernel's message; a missing schema or value is found
// across the whole call before any event is validated further; nothing of a
// refused call is journaled.
func TestInputError(t *testing.T) {
	h := idemHarness(t, kernel.Limits{})
	const count = "com.test/CountEvent@1"
	good := kernel.Event{Schema: count, JSON: []byte(`{"key":"a","by":1}`)}
	bad := kernel.Event{Schema: count, JSON: []byte(`{"key":"a","by":"one"}`)}
	before := h.journalLines(1)
	for _, c := range []struct {
		name    string
		evs     []kernel.Event
		index   int
		field   string
		missing bool
		msg     string
	}{
		{"no schema", []kernel.Event{{JSON: []byte(`1`)}}, 0, kernel.FieldSchema, true,
			"kernel: invalid input: event has no schema"},
		{"no value", []kernel.Event{{Schema: count}}, 0, kernel.FieldValue, true,
			"kernel: invalid input: event com.test/CountEvent@1 has no value"},
		{"empty JSON", []kernel.Event{{Schema: count, JSON: []byte{}}}, 0, kernel.FieldValue, true,
			"kernel: invalid input: event com.test/CountEvent@1 has no value"},
		{"missing found first", []kernel.Event{bad, good, {Schema: count}}, 2, kernel.FieldValue, true,
			"event 2: kernel: invalid input: event com.test/CountEvent@1 has no value"},
		{"unknown schema", []kernel.Event{{Schema: "com.test/Nope@1", JSON: []byte(`{}`)}}, 0, kernel.FieldSchema, false,
			`kernel: invalid input: unknown event schema "com.test/Nope@1"`},
		{"invalid value in a batch", []kernel.Event{good, bad}, 1, kernel.FieldValue, false,
			"event 1: kernel: invalid input: event com.test/CountEvent@1: schema com.test/CountEvent@1 at /by: expected integer, but got string"},
		{"both JSON and CBOR", []kernel.Event{{Schema: count, JSON: []byte(`{}`), CBOR: []byte{0xa0}}}, 0, kernel.FieldValue, false,
			"kernel: invalid input: event com.test/CountEvent@1: give the value as JSON or CBOR, not both"},
		{"bad idempotency key", []kernel.Event{good, keyed("has space", good)}, 1, kernel.FieldIdempotencyKey, false,
			"kernel: invalid input: event 1 (com.test/CountEvent@1): "}, // then the key's fault
	} {
		_, err := h.w.Ingest(context.Background(), c.evs...)
		var ie *kernel.InputError
		if !errors.As(err, &ie) || !errors.Is(err, kernel.ErrInvalid) {
			t.Errorf("%s: %v, want an *InputError matching ErrInvalid", c.name, err)
			continue
		}
		if ie.Index != c.index || ie.Field != c.field || ie.Missing != c.missing {
			t.Errorf("%s: index %d field %q missing %v, want %d %q %v", c.name, ie.Index, ie.Field, ie.Missing, c.index, c.field, c.missing)
		}
		if got := err.Error(); !strings.HasPrefix(got, c.msg) || (got != c.msg && c.field != kernel.FieldIdempotencyKey) {
			t.Errorf("%s: message %q, want %q", c.name, got, c.msg)
		}
	}
	if got := h.journalLines(1); got != before {
		t.Fatalf("refused calls journaled:\n%s\nwant\n%s", got, before)
	}
}
