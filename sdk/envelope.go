package sdk

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/modules"
)

// The step envelopes (DESIGN §5, docs/wasm-abi.md) are decoded and encoded
// by hand: their shape is fixed, and a guest pays for every step's envelope
// work, so it must not go through reflection. Author types go through the
// library (Marshal, Unmarshal).

// decodeInput decodes the input envelope
// {version, state: bytes|null, event: {schema, value, key?}, ctx?} into in.
// Keys may come in any order; unknown or repeated keys, a wrong type or
// trailing bytes are errors. Byte fields alias data. names, if not nil,
// interns the event's schema name.
func decodeInput(data []byte, in *modules.Input, names *names) error {
	*in = modules.Input{}
	r := reader{b: data}
	n, err := r.mapHead()
	if err != nil {
		return err
	}
	var seen uint8
	for i := uint64(0); i < n; i++ {
		k, err := r.text()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		var bit uint8
		switch string(k) {
		case "version":
			bit = 1
			in.Version, err = r.uint()
		case "state":
			bit = 2
			in.State, err = r.bytesOrNull()
		case "event":
			bit = 4
			err = decodeEventIn(&r, &in.Event, names)
		case "ctx":
			bit = 8
			in.Ctx, err = r.bytesOrNull()
		default:
			return fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if seen&bit != 0 {
			return fmt.Errorf("key %q twice", k)
		}
		seen |= bit
	}
	if seen&1 == 0 {
		return errors.New("no version")
	}
	if seen&4 == 0 {
		return errors.New("no event")
	}
	if r.off != len(data) {
		return fmt.Errorf("%d trailing bytes", len(data)-r.off)
	}
	return nil
}

func decodeEventIn(r *reader, ev *modules.EventIn, names *names) error {
	n, err := r.mapHead()
	if err != nil {
		return err
	}
	var seen uint8
	for i := uint64(0); i < n; i++ {
		k, err := r.text()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		var bit uint8
		switch string(k) {
		case "schema":
			bit = 1
			var s []byte
			s, err = r.text()
			ev.Schema = names.intern(s)
		case "value":
			bit = 2
			ev.Value, err = r.bytesOrNull()
		case "key":
			bit = 4
			ev.Key, err = r.bytesOrNull()
		default:
			return fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if seen&bit != 0 {
			return fmt.Errorf("key %q twice", k)
		}
		seen |= bit
	}
	if seen&2 == 0 {
		return errors.New("no value")
	}
	return nil
}

// names interns the schema names a guest sees, so decoding an envelope does
// not allocate one per step: a world has few of them. It stops growing at a
// bound, in case a host sends endless new ones.
type names map[string]string

func (n *names) intern(b []byte) string {
	if n == nil {
		return string(b)
	}
	if s, ok := (*n)[string(b)]; ok {
		return s
	}
	s := string(b)
	if *n == nil {
		*n = make(names)
	}
	if len(*n) < 256 {
		(*n)[s] = s
	}
	return s
}

// appendOutput appends the canonical CBOR of o, byte for byte what
// schemas.Marshal(o) writes: keys in canonical order (ann, state, effects,
// domain_events), empty optional fields left out.
func appendOutput(b []byte, o *modules.Output) []byte {
	n := uint64(1)
	if len(o.Ann) > 0 {
		n++
	}
	if len(o.Effects) > 0 {
		n++
	}
	if len(o.DomainEvents) > 0 {
		n++
	}
	b = canon.AppendMap(b, n)
	if len(o.Ann) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "ann"), o.Ann)
	}
	b = canon.AppendBytesOrNull(canon.AppendText(b, "state"), o.State)
	if len(o.Effects) > 0 {
		b = canon.AppendArray(canon.AppendText(b, "effects"), uint64(len(o.Effects)))
		for i := range o.Effects {
			b = appendEffect(b, &o.Effects[i])
		}
	}
	if len(o.DomainEvents) > 0 {
		b = canon.AppendArray(canon.AppendText(b, "domain_events"), uint64(len(o.DomainEvents)))
		for i := range o.DomainEvents {
			e := &o.DomainEvents[i]
			b = canon.AppendMap(b, 2)
			b = canon.AppendBytesOrNull(canon.AppendText(b, "value"), e.Value)
			b = canon.AppendText(canon.AppendText(b, "schema"), e.Schema)
		}
	}
	return b
}

// appendEffect writes an effect: keys effect, params, issuer_ref?,
// idempotency_key?.
func appendEffect(b []byte, e *modules.EffectOut) []byte {
	n := uint64(2)
	if e.IssuerRef != "" {
		n++
	}
	if len(e.IdempotencyKey) > 0 {
		n++
	}
	b = canon.AppendMap(b, n)
	b = canon.AppendText(canon.AppendText(b, "effect"), e.Effect)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "params"), e.Params)
	if e.IssuerRef != "" {
		b = canon.AppendText(canon.AppendText(b, "issuer_ref"), e.IssuerRef)
	}
	if len(e.IdempotencyKey) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "idempotency_key"), e.IdempotencyKey)
	}
	return b
}

// decodeContext decodes sys/WorkflowContext@1 (see decodeFields).
func decodeContext(data []byte, c *Context) error {
	return decodeFields(data, []field{
		{name: "now_ns", u64: &c.NowNs},
		{name: "logical_now_ns", u64: &c.LogicalNowNs},
		{name: "entropy", bytes: &c.Entropy},
		{name: "journal_height", u64: &c.JournalHeight},
		{name: "event_hash", text: &c.EventHash},
		{name: "manifest_hash", text: &c.ManifestHash},
		{name: "workflow", text: &c.Workflow},
		{name: "workflow_hash", text: &c.WorkflowHash},
		{name: "key", bytes: &c.Key},
		{name: "cell_mode", boolean: &c.CellMode},
	})
}

// maxFields bounds a record decodeFields decodes.
const maxFields = 16

// field is one struct field decodeFields fills: exactly one pointer is set.
type field struct {
	name    string
	u64     *uint64
	text    *string
	bytes   *[]byte // null decodes as nil
	boolean *bool
}

// decodeFields decodes a map of text keys into the sdk's own fixed records
// (the context, receipts), without reflection: they are on a step's hot
// path. Keys may come in any order and unknown keys are skipped (the kernel
// validated the value, and a schema may grow optional fields); a key given
// twice, a wrong type, invalid UTF-8, anything not well-formed or trailing
// bytes are errors, as the library's decoder would say (it may refuse more:
// null for a text or integer field, keys that are not text). Absent fields
// are left as they are. Nothing aliases data: the author may keep what it gets.
// All text fields share one allocation, and all byte fields another.
func decodeFields(data []byte, fields []field) error {
	r := reader{b: data}
	n, err := r.mapHead()
	if err != nil {
		return err
	}
	var spans [maxFields][]byte // by field index: text or bytes to copy out
	var seen uint32
	var unknown [][]byte // keys of skipped fields, to refuse them twice too
	var textLen, bytesLen int
	for i := uint64(0); i < n; i++ {
		k, err := r.text()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		j := 0
		for j < len(fields) && fields[j].name != string(k) {
			j++
		}
		if j == len(fields) {
			for _, u := range unknown {
				if bytes.Equal(u, k) {
					return fmt.Errorf("key %q twice", k)
				}
			}
			unknown = append(unknown, k)
			if _, err := r.skip(); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			continue
		}
		if seen&(1<<j) != 0 {
			return fmt.Errorf("key %q twice", k)
		}
		seen |= 1 << j
		f := &fields[j]
		switch {
		case f.u64 != nil:
			*f.u64, err = r.uint()
		case f.boolean != nil:
			*f.boolean, err = r.bool()
		case f.text != nil:
			spans[j], err = r.text()
			textLen += len(spans[j])
		default:
			if spans[j], err = r.bytesOrNull(); err == nil && spans[j] == nil {
				*f.bytes = nil
			}
			bytesLen += len(spans[j])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if r.off != len(data) {
		return fmt.Errorf("%d trailing bytes", len(data)-r.off)
	}
	var text strings.Builder
	text.Grow(textLen)
	buf := make([]byte, 0, bytesLen)
	for j, f := range fields {
		if seen&(1<<j) == 0 {
			continue
		}
		if f.text != nil {
			text.Write(spans[j])
		} else if f.bytes != nil && spans[j] != nil {
			buf = append(buf, spans[j]...)
			*f.bytes = buf[len(buf)-len(spans[j]) : len(buf) : len(buf)]
		}
	}
	all, at := text.String(), 0
	for j, f := range fields {
		if seen&(1<<j) != 0 && f.text != nil {
			*f.text, at = all[at:at+len(spans[j])], at+len(spans[j])
		}
	}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
