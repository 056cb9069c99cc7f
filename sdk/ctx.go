package sdk

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/sys"
)

// ErrNoContext is what Ctx.Context returns when the workflow's def declares
// no context. Its text names the fix.
var ErrNoContext = errors.New(`workflow context missing (declare "context": "` + sys.SchemaContext + `")`)

// Context is sys/WorkflowContext@1 (its fields are sys.Context's, the
// kernel's own): everything a step may know about the world beyond its
// state and event. The kernel stamps and journals it, so replay sees the
// same values.
type Context sys.Context

// Ctx is a step's view of its input beyond state and event, and where it
// puts what it emits. It is valid only during the step.
type Ctx struct {
	in      *modules.Input
	wc      *Context
	wcErr   error
	events  []modules.EventOut
	effects []modules.EffectOut
	ann     []byte
	err     error // the first Emit, Effect or Annotate that could not encode
}

// reset readies a reused Ctx for a step on in, keeping its lists' capacity
// but nothing they held.
func (c *Ctx) reset(in *modules.Input) {
	clear(c.events)
	clear(c.effects)
	*c = Ctx{in: in, events: c.events[:0], effects: c.effects[:0]}
}

// Schema is the name of the delivered event's schema (for a variant event,
// the variant's schema).
func (c *Ctx) Schema() string { return c.in.Event.Schema }

// Key is the cell key as canonical CBOR (a copy), nil for an unkeyed
// workflow.
func (c *Ctx) Key() []byte { return clone(c.in.Event.Key) }

// DecodeKey decodes the cell key into v (a pointer), e.g. a *string for a
// string key schema.
func (c *Ctx) DecodeKey(v any) error {
	if c.in.Event.Key == nil {
		return errors.New("cell key: the workflow is not keyed")
	}
	if err := Unmarshal(c.in.Event.Key, v); err != nil {
		return fmt.Errorf("cell key: %w", err)
	}
	return nil
}

// Context returns the workflow context, or ErrNoContext when the workflow
// def declares none. It is decoded on first use.
func (c *Ctx) Context() (*Context, error) {
	if c.wc == nil && c.wcErr == nil {
		if c.in.Ctx == nil {
			c.wcErr = ErrNoContext
		} else {
			wc := new(Context)
			if err := decodeContext(c.in.Ctx, wc); err != nil {
				c.wcErr = fmt.Errorf("workflow context does not decode: %w", err)
			} else {
				c.wc = wc
			}
		}
	}
	return c.wc, c.wcErr
}

// Emit emits a domain event: value, encoded canonically, must validate
// against schema, which the manifest routes onwards. A value that cannot be
// encoded fails the step.
func (c *Ctx) Emit(schema string, value any) {
	b, err := Marshal(value)
	if err != nil {
		c.fail(fmt.Errorf("emit %s: %w", schema, err))
		return
	}
	c.events = append(c.events, modules.EventOut{Schema: schema, Value: b})
}

// EffectOption refines an effect: IdempotencyKey or IssuerRef.
type EffectOption struct {
	key    []byte
	ref    string
	hasKey bool
}

// IdempotencyKey is part of the intent's identity: two emissions of the same
// effect and params from one step differ by it.
func IdempotencyKey(key []byte) EffectOption { return EffectOption{key: key, hasKey: true} }

// IssuerRef is a reference of the workflow's own that comes back in the
// receipt (ReceiptEnvelope.IssuerRef), to tell its effects apart.
func IssuerRef(ref string) EffectOption { return EffectOption{ref: ref} }

func (o EffectOption) apply(e *modules.EffectOut) {
	if o.hasKey {
		e.IdempotencyKey = o.key
	} else {
		e.IssuerRef = o.ref
	}
}

// Effect asks for an effect the workflow declares in effects_emitted, with
// params encoded canonically. Its receipt comes back to this cell as a
// ReceiptEnvelope (or a ReceiptRejected). Params that cannot be encoded fail
// the step.
func (c *Ctx) Effect(effect string, params any, opts ...EffectOption) {
	b, err := Marshal(params)
	if err != nil {
		c.fail(fmt.Errorf("effect %s params: %w", effect, err))
		return
	}
	e := modules.EffectOut{Effect: effect, Params: b}
	for _, o := range opts {
		o.apply(&e)
	}
	c.effects = append(c.effects, e)
}

// Timer asks for sys/timer.set@1: a receipt (payload TimerSetReceipt) comes
// back once the world's logical time reaches deliverAtNs. key, if not empty,
// comes back in the payload.
func (c *Ctx) Timer(deliverAtNs uint64, key string, opts ...EffectOption) {
	e := modules.EffectOut{Effect: EffectTimerSet, Params: appendTimerSetParams(make([]byte, 0, 16+len(key)), deliverAtNs, key)}
	for _, o := range opts {
		o.apply(&e)
	}
	c.effects = append(c.effects, e)
}

// Annotate sets the step output's annotation (its ann field) to v, encoded
// canonically: information for the host's tooling that changes nothing the
// world computes. The last call wins. A value that cannot be encoded fails
// the step.
func (c *Ctx) Annotate(v any) {
	b, err := Marshal(v)
	if err != nil {
		c.fail(fmt.Errorf("annotation: %w", err))
		return
	}
	c.ann = b
}

func (c *Ctx) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
