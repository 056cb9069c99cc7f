package wasm

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/modules"
)

// appendInput appends the canonical CBOR of in, byte for byte what
// schemas.Marshal(in) writes (the tests hold it to that), without
// reflection or allocation: it runs on every step.
//
// Keys in canonical order (shorter first, then bytewise): ctx, event, state,
// version; inside event: key, value, schema. Omitempty fields are left out
// when empty, and a nil byte string is null, as the encoder does.
func appendInput(b []byte, in *modules.Input) []byte {
	n := uint64(3)
	if len(in.Ctx) > 0 {
		n = 4
	}
	b = canon.AppendMap(b, n)
	if len(in.Ctx) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "ctx"), in.Ctx)
	}
	b = canon.AppendText(b, "event")
	ev := &in.Event
	if len(ev.Key) > 0 {
		b = canon.AppendMap(b, 3)
		b = canon.AppendBytesOrNull(canon.AppendText(b, "key"), ev.Key)
	} else {
		b = canon.AppendMap(b, 2)
	}
	b = canon.AppendBytesOrNull(canon.AppendText(b, "value"), ev.Value)
	b = canon.AppendText(canon.AppendText(b, "schema"), ev.Schema)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "state"), in.State)
	return canon.AppendUint(canon.AppendText(b, "version"), in.Version)
}

// decodeOutput decodes a guest's output envelope strictly: it must be the
// canonical CBOR of a modules.Output, exactly what schemas.Marshal writes for
// the value it decodes to (the tests hold it to that). So the map has only
// the keys state (required), domain_events, effects and ann, with their
// types, in canonical order; an optional key whose value is empty is left
// out rather than written empty; heads are shortest, lengths definite, text
// is UTF-8, and nothing follows the map.
//
// The returned slices alias b. The error's text is the fault reason.
func decodeOutput(b []byte) (*modules.Output, error) {
	d := decoder{b: b, index: -1}
	out := &modules.Output{}
	if err := d.output(out); err != nil {
		return nil, err
	}
	if d.off != len(b) {
		return nil, d.notCanonical("%d bytes after the envelope", len(b)-d.off)
	}
	return out, nil
}

// fieldSet lists a map's keys, in canonical order, each with whether it is
// required.
type fieldSet []struct {
	name     string
	required bool
}

var (
	outputKeys = fieldSet{{"ann", false}, {"state", true}, {"effects", false}, {"domain_events", false}}
	eventKeys  = fieldSet{{"value", true}, {"schema", true}}
	effectKeys = fieldSet{{"effect", true}, {"params", true}, {"issuer_ref", false}, {"idempotency_key", false}}
)

func (d *decoder) output(out *modules.Output) error {
	n, err := d.mapHead()
	if err != nil {
		return err
	}
	var m mapState
	for range n {
		k, err := d.key(&m, outputKeys)
		if err != nil {
			return err
		}
		d.field = outputKeys[k].name
		switch k {
		case 0:
			out.Ann, err = d.bytes()
		case 1:
			out.State, err = d.bytesOrNull()
		case 2:
			err = d.effects(out)
		case 3:
			err = d.events(out)
		}
		if err != nil {
			return err
		}
		d.field = ""
	}
	return d.required(&m, outputKeys)
}

func (d *decoder) events(out *modules.Output) error {
	n, err := d.arrayHead()
	if err != nil {
		return err
	}
	out.DomainEvents = make([]modules.EventOut, n)
	for i := range out.DomainEvents {
		e := &out.DomainEvents[i]
		d.index = i
		n, err := d.mapHead()
		if err != nil {
			return err
		}
		var m mapState
		for range n {
			k, err := d.key(&m, eventKeys)
			if err != nil {
				return err
			}
			d.sub = eventKeys[k].name
			if k == 0 {
				e.Value, err = d.bytesOrNull()
			} else {
				e.Schema, err = d.text(false)
			}
			if err != nil {
				return err
			}
			d.sub = ""
		}
		if err := d.required(&m, eventKeys); err != nil {
			return err
		}
	}
	d.index = -1
	return nil
}

func (d *decoder) effects(out *modules.Output) error {
	n, err := d.arrayHead()
	if err != nil {
		return err
	}
	out.Effects = make([]modules.EffectOut, n)
	for i := range out.Effects {
		e := &out.Effects[i]
		d.index = i
		n, err := d.mapHead()
		if err != nil {
			return err
		}
		var m mapState
		for range n {
			k, err := d.key(&m, effectKeys)
			if err != nil {
				return err
			}
			d.sub = effectKeys[k].name
			switch k {
			case 0:
				e.Effect, err = d.text(false)
			case 1:
				e.Params, err = d.bytesOrNull()
			case 2:
				e.IssuerRef, err = d.text(true)
			case 3:
				e.IdempotencyKey, err = d.bytes()
			}
			if err != nil {
				return err
			}
			d.sub = ""
		}
		if err := d.required(&m, effectKeys); err != nil {
			return err
		}
	}
	d.index = -1
	return nil
}

// decoder walks one output envelope. field, index and sub locate the item
// being read, for error messages: domain_events[2].value.
type decoder struct {
	b     []byte
	off   int
	field string
	index int
	sub   string
}

func (d *decoder) where() string {
	if d.field == "" {
		return "the envelope"
	}
	s := d.field
	if d.index >= 0 {
		s += "[" + strconv.Itoa(d.index) + "]"
		if d.sub != "" {
			s += "." + d.sub
		}
	}
	return s
}

// outputError is a fault reason about the output's shape.
func outputError(format string, args ...any) error {
	return errors.New("wasm guest output: " + fmt.Sprintf(format, args...))
}

func (d *decoder) notCanonical(format string, args ...any) error {
	return fmt.Errorf("wasm guest output is not canonical CBOR: %s (at byte %d)", fmt.Sprintf(format, args...), d.off)
}

// head reads one item head: major type and argument; for major type 7 the
// argument is the additional information (20-23 are false, true, null,
// undefined; 25-27 floats).
func (d *decoder) head() (major byte, arg uint64, err error) {
	major, arg, next, ok := canon.Head(d.b, d.off)
	if !ok {
		switch canon.Why(d.b, d.off) {
		case canon.Indefinite:
			return 0, 0, d.notCanonical("indefinite-length item")
		case canon.Reserved:
			return 0, 0, d.notCanonical("reserved head byte 0x%02x", d.b[d.off])
		}
		return 0, 0, d.notCanonical("truncated")
	}
	if major == canon.MajorSimple {
		// Floats and simple values 32-255 are valid CBOR but never valid
		// here; their type is the complaint.
		arg = uint64(d.b[d.off] & 0x1f)
	} else if next-d.off != canon.HeadLen(arg) {
		return 0, 0, d.notCanonical("head of %d not in its shortest form", arg)
	}
	d.off = next
	return major, arg, nil
}

// typed reads a head that must be of major type want, or complains that
// the item at where() is something else.
func (d *decoder) typed(want byte, wantName string) (uint64, error) {
	start := d.off
	major, arg, err := d.head()
	if err != nil {
		return 0, err
	}
	if major != want {
		d.off = start
		return 0, outputError("%s is %s, want %s", d.where(), typeName(major, arg), wantName)
	}
	return arg, nil
}

// content returns the n bytes of a string's content.
func (d *decoder) content(n uint64) ([]byte, error) {
	if uint64(len(d.b)-d.off) < n {
		return nil, d.notCanonical("truncated")
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v, nil
}

func typeName(major byte, arg uint64) string {
	if major != canon.MajorSimple {
		return canon.TypeName(major)
	}
	switch arg {
	case 20, 21:
		return "a boolean"
	case 22:
		return "null"
	case 23:
		return "undefined"
	case 25, 26, 27:
		return "a float"
	}
	return "a simple value"
}

func (d *decoder) bytesOrNull() ([]byte, error) {
	if d.off < len(d.b) && d.b[d.off] == canon.Null {
		d.off++
		return nil, nil
	}
	n, err := d.typed(canon.MajorBytes, "a byte string or null")
	if err != nil {
		return nil, err
	}
	return d.content(n)
}

// bytes reads an omitempty byte string: present means non-empty.
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.typed(canon.MajorBytes, "a byte string")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, outputError("%s is empty; leave the key out instead", d.where())
	}
	return d.content(n)
}

func (d *decoder) text(omitempty bool) (string, error) {
	n, err := d.typed(canon.MajorText, "a text string")
	if err != nil {
		return "", err
	}
	if n == 0 && omitempty {
		return "", outputError("%s is empty; leave the key out instead", d.where())
	}
	v, err := d.content(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(v) {
		d.off -= len(v)
		return "", d.notCanonical("%s is not UTF-8", d.where())
	}
	return string(v), nil
}

// arrayHead reads the head of an omitempty array: present means non-empty.
func (d *decoder) arrayHead() (int, error) {
	n, err := d.typed(canon.MajorArray, "an array")
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, outputError("%s is empty; leave the key out instead", d.where())
	}
	if n > uint64(len(d.b)-d.off) { // every element takes a byte at least
		return 0, d.notCanonical("truncated")
	}
	return int(n), nil
}

func (d *decoder) mapHead() (int, error) {
	n, err := d.typed(canon.MajorMap, "a map")
	if err != nil {
		return 0, err
	}
	if n > uint64(len(d.b)-d.off)/2 { // every pair takes two bytes at least
		return 0, d.notCanonical("truncated")
	}
	return int(n), nil
}

// mapState follows the keys of one map: which were seen, and the last one's
// encoding, which the next must follow in canonical order.
type mapState struct {
	seen uint32
	prev []byte
}

// key reads a map key, which must be a text string from set, after the
// previous key in canonical order, and returns its index in set.
func (d *decoder) key(m *mapState, set fieldSet) (int, error) {
	start := d.off
	major, n, err := d.head()
	if err != nil {
		return 0, err
	}
	if major != canon.MajorText {
		d.off = start
		return 0, outputError("a key of %s is %s, want a text string", d.where(), typeName(major, n))
	}
	kb, err := d.content(n)
	if err != nil {
		return 0, err
	}
	enc := d.b[start:d.off]
	if m.prev != nil {
		switch c := bytes.Compare(m.prev, enc); {
		case c == 0:
			d.off = start
			return 0, d.notCanonical("key %q of %s appears twice", kb, d.where())
		case c > 0:
			d.off = start
			return 0, d.notCanonical("key %q of %s is out of canonical order", kb, d.where())
		}
	}
	m.prev = enc
	for j := range set {
		if set[j].name == string(kb) {
			m.seen |= 1 << j
			return j, nil
		}
	}
	if d.field == "" {
		return 0, outputError("unknown key %q", kb)
	}
	return 0, outputError("unknown key %q in %s", kb, d.where())
}

func (d *decoder) required(m *mapState, set fieldSet) error {
	for j := range set {
		if set[j].required && m.seen&(1<<j) == 0 {
			if d.field == "" {
				return outputError("missing key %q", set[j].name)
			}
			return outputError("missing key %q in %s", set[j].name, d.where())
		}
	}
	return nil
}
