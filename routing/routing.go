package routing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

// ErrKey reports an event whose key is missing at key_field or does not
// validate against the workflow's key_schema.
var ErrKey = errors.New("routing: bad key")

// Target is one delivery: the workflow, the cell key (canonical CBOR; nil for
// an unkeyed workflow) and the value as the workflow sees it (wrapped as a
// variant arm where the subscription asks for it).
type Target struct {
	Workflow string
	Key      []byte
	Schema   string // the workflow's event schema
	Value    []byte // canonical CBOR
}

type sub struct {
	index     int
	event     string
	workflow  string
	wfEvent   string
	keyField  string
	keyPath   []string
	keySchema string
	wrapTag   string // non-empty: deliver as {"$tag": wrapTag, "$value": event}
}

// Router routes events for one manifest. It is immutable and safe for
// concurrent use.
type Router struct {
	reg    *schemas.Registry
	byName map[string][]*sub // event schema -> subscriptions in manifest order
}

// New builds a router for m. The manifest loader has already checked the
// subscriptions; New only precomputes.
func New(m *manifest.Manifest) (*Router, error) {
	r := &Router{reg: m.Registry, byName: map[string][]*sub{}}
	for i, s := range m.Routing.Subscriptions {
		wf, ok := m.Workflows[s.Workflow]
		if !ok {
			return nil, fmt.Errorf("routing: subscription %d: unknown workflow %s", i, s.Workflow)
		}
		rs := &sub{index: i, event: s.Event, workflow: s.Workflow, wfEvent: wf.Event,
			keyField: s.KeyField, keySchema: wf.KeySchema}
		if s.Event != wf.Event {
			for _, a := range m.Registry.Arms(wf.Event) {
				if a.Schema == s.Event {
					rs.wrapTag = a.Tag
					break
				}
			}
			if rs.wrapTag == "" {
				return nil, fmt.Errorf("routing: subscription %d: event %s is neither %s's event nor an arm of it", i, s.Event, s.Workflow)
			}
		}
		if s.KeyField != "" {
			rs.keyPath = strings.Split(s.KeyField, ".")
			// A "$value." path on an arm-wrapped delivery addresses the event
			// itself: the wrapper is added by us, so strip it.
			if rs.wrapTag != "" && len(rs.keyPath) > 1 && rs.keyPath[0] == "$value" {
				rs.keyPath = rs.keyPath[1:]
			}
		}
		r.byName[s.Event] = append(r.byName[s.Event], rs)
	}
	return r, nil
}

// Subscribed reports whether any subscription matches schema.
func (r *Router) Subscribed(schema string) bool { return len(r.byName[schema]) > 0 }

// Route returns the deliveries for one event, in manifest order. value must be
// canonical CBOR already validated against schema. An event that matches no
// subscription routes nowhere (an empty result, not an error).
func (r *Router) Route(schema string, value []byte) ([]Target, error) {
	subs := r.byName[schema]
	if len(subs) == 0 {
		return nil, nil
	}
	out := make([]Target, 0, len(subs))
	for _, s := range subs {
		t := Target{Workflow: s.workflow, Schema: s.wfEvent, Value: value}
		if s.wrapTag != "" {
			t.Value = Wrap(s.wrapTag, value)
		}
		if s.keyPath != nil {
			kb, err := lookupCBOR(value, s.keyPath)
			if errors.Is(err, errMalformed) {
				return nil, fmt.Errorf("routing: event %s: %w", schema, err)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: event %s, subscription %d (workflow %s, key_field %q): %v",
					ErrKey, schema, s.index, s.workflow, s.keyField, err)
			}
			if err := r.reg.Validate(s.keySchema, kb); err != nil {
				return nil, fmt.Errorf("%w: event %s, workflow %s: key at %q does not validate against %s: %v",
					ErrKey, schema, s.workflow, s.keyField, s.keySchema, err)
			}
			t.Key = kb
		}
		out = append(out, t)
	}
	return out, nil
}

// Wrap encodes {"$tag": tag, "$value": value} canonically; value must already
// be canonical CBOR.
// It is written by hand (the keys' canonical order is "$tag", "$value")
// because every event delivered through a variant arm is wrapped.
func Wrap(tag string, value []byte) []byte {
	b := make([]byte, 0, 1+5+9+len(tag)+7+len(value))
	b = append(b, 0xa2, 0x64, '$', 't', 'a', 'g')
	b = canon.AppendText(b, tag)
	b = append(b, 0x66, '$', 'v', 'a', 'l', 'u', 'e')
	return append(b, value...)
}

// Unwrap reads a value Wrap made back into its tag and the arm's value.
// ok is false when value is not exactly {"$tag": text, "$value": ...} in
// Wrap's layout (the one canonical layout of a variant value).
func Unwrap(value []byte) (tag string, inner []byte, ok bool) {
	const head = "\xa2\x64$tag"
	if len(value) < len(head) || string(value[:len(head)]) != head {
		return "", nil, false
	}
	major, n, i, ok := canon.Head(value, len(head))
	if !ok || major != canon.MajorText || uint64(len(value)-i) < n {
		return "", nil, false
	}
	tag = string(value[i : i+int(n)])
	rest := value[i+int(n):]
	const vk = "\x66$value"
	if len(rest) <= len(vk) || string(rest[:len(vk)]) != vk {
		return "", nil, false
	}
	return tag, rest[len(vk):], true
}
