package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/aos-kernel/aos/internal/jsonx"
	"github.com/aos-kernel/aos/views"
)

// oldEvent is an event as POST /v1/events read it before parseEvents, a
// key given as "" told apart from none.
type oldEvent struct {
	Schema         string          `json:"schema"`
	Value          json.RawMessage `json:"value"`
	IdempotencyKey *string         `json:"idempotency_key"`
}

// oldParseEvents is how POST /v1/events read its body before parseEvents:
// encoding/json, strictly (unknown fields and trailing data refused), into
// oldEvent. The differential tests hold parseEvents to it.
func oldParseEvents(b []byte) ([]oldEvent, bool, error) {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var wire []oldEvent
		if err := encodingJSONDecode(b, &wire); err != nil {
			return nil, true, err
		}
		return wire, true, nil
	}
	var ev oldEvent
	if err := encodingJSONDecode(b, &ev); err != nil {
		return nil, false, err
	}
	return []oldEvent{ev}, false, nil
}

// encodingJSONDecode is encoding/json's reading of one value b holds into
// v, refusing unknown fields (case-insensitively, as encoding/json matches
// them) and anything but whitespace after the value.
func encodingJSONDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("trailing data at byte %d", len(b)-len(rest))
	}
	return nil
}

// tightened says why parseEvents may refuse a body encoding/json took, or
// "": the places where the old reading was looser than the API means.
// An envelope key given twice (encoding/json kept the last) or spelled in
// another case (encoding/json matches keys case-insensitively) is refused
// now, and a body that is not UTF-8, or holds a lone surrogate escape, is
// refused at the envelope (encoding/json put U+FFFD in its strings).
func tightened(b []byte) string {
	if !utf8.Valid(b) {
		return "not UTF-8"
	}
	var sc jsonx.Scanner
	if sc.Reset(b, jsonx.Options{}) == nil {
		for {
			if _, more := sc.Peek(); !more {
				break
			}
			if _, err := sc.Skip(); err != nil {
				var e *jsonx.Error
				if errors.As(err, &e) && e.Kind == jsonx.LoneSurrogate {
					return "lone surrogate"
				}
				break
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var why string
	var object func(depth int) // at an object's members, depth 0: an event
	var value func(depth int)
	value = func(depth int) {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch tok {
		case json.Delim('{'):
			object(depth)
		case json.Delim('['):
			for dec.More() {
				value(depth + 1)
			}
			_, _ = dec.Token()
		}
	}
	object = func(depth int) {
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return
			}
			k := tok.(string)
			if depth == 0 && why == "" {
				switch {
				case k != "schema" && k != "value" && k != "idempotency_key":
					why = "key " + k + " is not exact"
				case seen[k]:
					why = "key " + k + " twice"
				}
				seen[k] = true
			}
			value(depth + 1)
		}
		_, _ = dec.Token()
	}
	tok, err := dec.Token()
	if err != nil {
		return ""
	}
	switch tok {
	case json.Delim('{'):
		object(0)
	case json.Delim('['):
		for dec.More() {
			if t, err := dec.Token(); err == nil && t == json.Delim('{') {
				object(0)
			} else if err == nil && (t == json.Delim('[')) {
				for dec.More() {
					value(1)
				}
				_, _ = dec.Token()
			}
		}
	}
	return why
}

// sameEvents compares two readings of a body: schema, value bytes, the
// idempotency key (absent or "" reads as none), and the first event that
// gave its key as "" (eventsBody.emptyKey).
func sameEvents(a eventsBody, b []oldEvent) error {
	if len(a.events) != len(b) {
		return fmt.Errorf("%d events, want %d", len(a.events), len(b))
	}
	emptyKey := -1
	for i := range b {
		x, y := a.events[i], b[i]
		key := ""
		if y.IdempotencyKey != nil {
			key = *y.IdempotencyKey
			if key == "" && emptyKey < 0 {
				emptyKey = i
			}
		}
		switch {
		case x.Schema != y.Schema:
			return fmt.Errorf("event %d: schema %q, want %q", i, x.Schema, y.Schema)
		case !bytes.Equal(x.Value, y.Value) || (x.Value == nil) != (y.Value == nil):
			return fmt.Errorf("event %d: value %q, want %q", i, x.Value, y.Value)
		case x.IdempotencyKey != key:
			return fmt.Errorf("event %d: idempotency_key %q, want %q", i, x.IdempotencyKey, key)
		}
	}
	if a.emptyKey != emptyKey {
		return fmt.Errorf("the first event with an empty idempotency_key is %d, want %d", a.emptyKey, emptyKey)
	}
	return nil
}

// checkParseEvents holds parseEvents to oldParseEvents on body: both
// accept with the same events and batch flag, both refuse, or the old one
// accepted what tightened names. It returns what happened, for the table.
func checkParseEvents(t *testing.T, body []byte) string {
	t.Helper()
	in, err := parseEvents(body, 0)
	owire, obatch, oerr := oldParseEvents(body)
	switch {
	case err == nil && oerr == nil:
		if in.batch != obatch {
			t.Fatalf("%q: batch %t, encoding/json %t", body, in.batch, obatch)
		}
		if e := sameEvents(in, owire); e != nil {
			t.Fatalf("%q: %v", body, e)
		}
		return "accepted"
	case err == nil:
		t.Fatalf("%q: accepted, encoding/json refused: %v", body, oerr)
	case oerr == nil:
		why := tightened(body)
		if why == "" {
			t.Fatalf("%q: refused (%v), encoding/json accepted", body, err)
		}
		return "tightened"
	}
	var je *jsonx.Error
	var trailing *views.TrailingError
	if !errors.As(err, &je) && !errors.As(err, &trailing) && !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("%q: refusal %v is neither a *jsonx.Error, trailing data nor an unknown field", body, err)
	}
	return "refused"
}

// TestParseEventsAsEncodingJSON: parseEvents reads each body as
// encoding/json did (same events, or both refuse), but where the table says
// it is tighter, and then says what and where.
func TestParseEventsAsEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		body, want string
		msg        string // part of the refusal, when refused
	}{
		{`{"schema":"t/Add@1","value":{"key":"a","by":1}}`, "accepted", ""},
		{`{"schema":"t/Add@1","value":{"key":"a","by":1},"idempotency_key":"k1"}`, "accepted", ""},
		{" \n\t{ \"value\" : [1, 2.5e3, -0, \"x\\u00e9\"] , \"schema\" : \"s\" }\r\n ", "accepted", ""},
		{`{"schema":"s","value":{"a":{"b":[{"c":null}]},"d":true,"e":false}}`, "accepted", ""},
		{`{"schema":"s","value":"\ud834\udd1e \\ \/ \b\f\n\r\t"}`, "accepted", ""},
		{`{"schema":"s","value":{"k":"\ud834\udd1e \ud800"}}`, "tightened", `value: json: at byte 41: lone UTF-16 surrogate \ud800`},
		{`{"schema":"s\udc00","value":1}`, "tightened", `schema: json: at byte 12: lone UTF-16 surrogate \udc00`},
		{`{"sch\u0065ma":"s\u002f1","value":1,"idempotency_\u006bey":"\u006b"}`, "accepted", ""},
		{`{"schema":null,"value":1,"idempotency_key":null}`, "accepted", ""},
		{`{"schema":"s","value":null}`, "accepted", ""},
		{`{"schema":"s","value":{"a":1,"a":2}}`, "accepted", ""}, // the kernel refuses the value's duplicate
		{`{"schema":"s"}`, "accepted", ""},
		{`{"value":1}`, "accepted", ""},
		{`{}`, "accepted", ""},
		{`null`, "accepted", ""},
		{`[]`, "accepted", ""},
		{` [ null , {"schema":"a","value":1} , {"schema":"b","value":{},"idempotency_key":""} ] `, "accepted", ""},
		{`{"schema":"s","value":1,"idempotency_key":""}`, "accepted", ""},
		{`[{"schema":"a","value":1,"idempotency_key":""},{"schema":"b","value":2,"idempotency_key":""}]`, "accepted", ""},
		{``, "refused", "unexpected end of input"},
		{`   `, "refused", "unexpected end of input"},
		{`{"schema":"s","value":1`, "refused", "unexpected end of input"},
		{`{"schema":"s","value":1}x`, "refused", "trailing data after the JSON value (at byte 24)"},
		{`{"schema":"s","value":1} {}`, "refused", "trailing data after the JSON value (at byte 25)"},
		{`[{"schema":"s","value":1}] []`, "refused", "trailing data after the JSON value (at byte 27)"},
		{`{"schema":"s","value":1,"extra":2}`, "refused", `unknown field "extra"`},
		{`[{"schema":"s","value":1},{"schema":"s","value":1,"Extra":2}]`, "refused", `events[1]: json: at byte 50: unknown field "Extra"`},
		{`{"schema":"s","value":1,}`, "refused", "beginning of object key string"},
		{`{"schema":"s","value":01}`, "refused", "after object key:value pair"},
		{`{"schema":"s","value":[1,]}`, "refused", "beginning of value"},
		{`{"schema":"s","value":{"a" 1}}`, "refused", "after object key"},
		{`{"schema":"s","value":"a\qb"}`, "refused", "in string escape code"},
		{`{"schema":"s","value":"\u12g4"}`, "refused", `in \u hexadecimal character escape`},
		{"{\"schema\":\"s\",\"value\":\"a\tb\"}", "refused", "in string literal"},
		{`{"schema":"s","value":tru}`, "refused", "in literal true"},
		{`{"schema":"s","value":1.}`, "refused", "after decimal point"},
		{`{"schema":"s","value":1e}`, "refused", "in exponent"},
		{`{"schema":5,"value":1}`, "refused", "schema: json: at byte 10: value is not a string"},
		{`{"schema":"s","value":1,"idempotency_key":7}`, "refused", "idempotency_key: json: at byte 42: value is not a string"},
		{`{"schema":["s"],"value":1}`, "refused", "value is not a string"},
		{`{"schema":"s","value":1,"idempotency_key":{}}`, "refused", "value is not a string"},
		{`{"schema":{"x":},"value":1}`, "refused", "beginning of value"},
		{`"s"`, "refused", "value is not an event object"},
		{`5`, "refused", "value is not an event object"},
		{`[5]`, "refused", "events[0]: json: at byte 1: value is not an event object"},
		{`[{"schema":"s","value":1} {"schema":"s","value":1}]`, "refused", "after array element"},
		{`[[]]`, "refused", "value is not an event object"},
		{`{"schema":"s","value":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, "refused", "nesting deeper than 10000"},
		{`{"schema":"s","value":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, "accepted", ""},
		{`{"schema":"a","schema":"b","value":1}`, "tightened", `json: at byte 14: duplicate object key "schema"`},
		{`{"schema":"a","value":1,"value":2}`, "tightened", `duplicate object key "value"`},
		{`{"schema":"a","value":1,"idempotency_key":"k","idempotency_key":"k"}`, "tightened", `duplicate object key "idempotency_key"`},
		{`{"sch\u0065ma":"a","schema":"b","value":1}`, "tightened", `duplicate object key "schema"`},
		{`{"schema":"a","value":1}}`, "refused", "trailing data after the JSON value (at byte 24)"},
		{`[{"schema":"a","value":1}] ]`, "refused", "trailing data after the JSON value (at byte 27)"},
		{`{"Schema":"a","value":1}`, "tightened", `unknown field "Schema"`},
		{`{"schema":"a","VALUE":1}`, "tightened", `unknown field "VALUE"`},
		{"{\"schema\":\"a\xff\",\"value\":1}", "tightened", "json: at byte 12: input is not valid UTF-8"},
		{"{\"schema\":\"a\",\"value\":\"\xc3\"}", "tightened", "input is not valid UTF-8"},
	} {
		t.Run(c.body[:min(len(c.body), 60)], func(t *testing.T) {
			if got := checkParseEvents(t, []byte(c.body)); got != c.want {
				t.Fatalf("%q: %s, want %s", c.body, got, c.want)
			}
			if c.msg != "" {
				_, err := parseEvents([]byte(c.body), 0)
				if !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("%q: refusal %q does not say %q", c.body, err, c.msg)
				}
			}
		})
	}
}

// FuzzParseEvents holds parseEvents to encoding/json's reading of any body.
func FuzzParseEvents(f *testing.F) {
	for _, s := range []string{
		`{"schema":"t/Add@1","value":{"key":"a","by":1}}`,
		`[{"schema":"a","value":1,"idempotency_key":"k"},null,{"value":"\u00e9"}]`,
		`{"sch\u0065ma":"s","value":[1,{"a":"b"}],"idempotency_key":null}`,
		`{"schema":"a","schema":"b"}`, `{"Value":1}`, `[{}] x`, `{"value":1e5,"schema":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParseEvents(t, body)
	})
}

// A body is read into a buffer sized from its Content-Length, one byte
// over so that finding its end needs no growth, and no bigger than
// maxPresize before the bytes arrive; of unknown length, from 512 bytes
// up. Whatever the size, every byte is read.
func TestReadBodyPresized(t *testing.T) {
	for _, c := range []struct {
		n, limit int64
		want     int
	}{
		{-1, 8 << 20, 512},
		{0, 8 << 20, 1},
		{57, 8 << 20, 58},
		{8 << 20, 8 << 20, maxPresize + 1},
		{1 << 40, 1 << 41, maxPresize + 1},
		{100, 10, 11},
	} {
		if got := presize(c.n, c.limit); got != c.want {
			t.Errorf("presize(%d, %d) = %d, want %d", c.n, c.limit, got, c.want)
		}
	}
	body := bytes.Repeat([]byte("0123456789"), 100)
	b, err := readAll(bytes.NewReader(body), presize(int64(len(body)), 8<<20))
	if err != nil || !bytes.Equal(b, body) || cap(b) != len(body)+1 {
		t.Fatalf("read %d bytes (cap %d, err %v), want the %d given in a buffer of %d", len(b), cap(b), err, len(body), len(body)+1)
	}
	for _, size := range []int{1, 3, 512} {
		b, err := readAll(iotest.HalfReader(bytes.NewReader(body)), size)
		if err != nil || !bytes.Equal(b, body) {
			t.Fatalf("size %d: read %q, %v", size, b, err)
		}
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 4); err != io.ErrUnexpectedEOF {
		t.Fatalf("a failing read gave %v", err)
	}
}
