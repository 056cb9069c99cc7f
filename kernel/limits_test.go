package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

const limitsManifest = `[
 {"$kind":"defschema","name":"com.test/LimitAct@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/LimitEvent@1","variant":{"Act":"com.test/LimitAct@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"com.test/LimitState@1","schema":{"type":"object","properties":{"pad":{"type":"string"}},"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/Note@1","schema":{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"]}},
 {"$kind":"defschema","name":"com.test/FxParams@1","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/FxReceipt@1","schema":{"type":"object"}},
 {"$kind":"defschema","name":"com.test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defeffect","name":"com.test/fx@1","params":"com.test/FxParams@1","receipt":"com.test/FxReceipt@1"},
 {"$kind":"defmodule","name":"com.test/limits_mod@1","runtime":{"kind":"builtin","builtin":"test/limits","identity":"test/limits@1"}},
 {"$kind":"defworkflow","name":"com.test/limits@1","state":"com.test/LimitState@1","event":"com.test/LimitEvent@1","key_schema":"com.test/Key@1","effects_emitted":["com.test/fx@1"],"impl":{"module":"com.test/limits_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/limits","routing":{"subscriptions":[{"event":"com.test/LimitAct@1","workflow":"com.test/limits@1","key_field":"key"}]}}
]`

// limitsStep misbehaves as its event's "act" says.
func limitsStep(in *modules.Input) (*modules.Output, error) {
	var ev struct {
		Value struct {
			Act string `cbor:"act"`
		} `cbor:"$value"`
	}
	if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
		return nil, err
	}
	fx := func(n any) modules.EffectOut {
		return modules.EffectOut{Effect: "com.test/fx@1", Params: schemas.MustMarshal(map[string]any{"n": n})}
	}
	note := func(i int) modules.EventOut {
		return modules.EventOut{Schema: "com.test/Note@1", Value: schemas.MustMarshal(map[string]any{"i": i})}
	}
	out := &modules.Output{State: schemas.MustMarshal(map[string]any{})}
	switch ev.Value.Act {
	case "at-limits": // exactly what the limits allow
		out.Effects = []modules.EffectOut{fx(1), fx(2)}
		out.DomainEvents = []modules.EventOut{note(1), note(2)}
	case "undeclared":
		out.Effects = []modules.EffectOut{{Effect: "sys/timer.set@1", Params: schemas.MustMarshal(map[string]any{"deliver_at_ns": 1, "key": "k"})}}
	case "effects":
		out.Effects = []modules.EffectOut{fx(1), fx(2), fx(3)}
	case "events":
		out.DomainEvents = []modules.EventOut{note(1), note(2), note(3)}
	case "big":
		out.State = schemas.MustMarshal(map[string]any{"pad": strings.Repeat("x", 2000)})
	case "params":
		out.Effects = []modules.EffectOut{fx("not a number")}
	case "state":
		out.State = schemas.MustMarshal(map[string]any{"pad": 7})
	case "long-error": // a fault text the journal must not keep whole
		return nil, errors.New(strings.Repeat("é", 6000))
	case "unknown-event":
		out.DomainEvents = []modules.EventOut{{Schema: "com.test/Nope@1", Value: schemas.MustMarshal(map[string]any{})}}
	}
	return out, nil
}

// TestStepLimitsAndAdmission: each check a step's output passes through
// fails the instance with a journaled reason naming it, and an output exactly
// at the limits passes. Removing any one check fails its case.
func TestStepLimitsAndAdmission(t *testing.T) {
	h := newHarnessWith(t, 5, false, func(h *harness) {
		h.builtins.MustRegister("test/limits", "test/limits@1", "step", limitsStep)
		h.extra = func(c *kernel.Config) {
			c.Limits = kernel.Limits{MaxEffects: 2, MaxDomainEvents: 2, MaxOutputBytes: 1024}
		}
	})
	mustApply(t, h, limitsManifest)
	for _, c := range []struct {
		act   string
		wants []string // empty: the step succeeds
	}{
		{"at-limits", nil},
		{"undeclared", []string{"effect 0 (sys/timer.set@1)", "not in com.test/limits@1 effects_emitted"}},
		{"effects", []string{"emitted 3 effects, limit 2"}},
		{"events", []string{"emitted 3 domain events, limit 2"}},
		{"big", []string{"step output is", "limit 1024"}},
		{"params", []string{"effect 0 (com.test/fx@1)", "params do not validate against com.test/FxParams@1"}},
		{"state", []string{"state does not validate against com.test/LimitState@1"}},
		{"unknown-event", []string{`unknown schema "com.test/Nope@1"`}},
		{"long-error", []string{"step returned an error: ééé", "... (12024 bytes in all)"}},
	} {
		t.Run(c.act, func(t *testing.T) {
			ev := kernel.Event{Schema: "com.test/LimitAct@1", JSON: []byte(fmt.Sprintf(`{"key":%q,"act":%q}`, c.act, c.act))}
			if _, err := h.w.Submit(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			v, err := h.w.Cell(context.Background(), "com.test/limits@1", schemas.MustMarshal(c.act))
			if err != nil {
				t.Fatal(err)
			}
			if c.wants == nil {
				if v.Status == kernel.StatusFailed {
					t.Fatalf("an output at the limits failed: %s", v.Reason)
				}
				if len(v.Inflight) != 2 {
					t.Fatalf("%d intents in flight, want 2", len(v.Inflight))
				}
				return
			}
			if v.Status != kernel.StatusFailed {
				t.Fatalf("status %s, want failed", v.Status)
			}
			for _, w := range c.wants {
				if !strings.Contains(v.Reason, w) {
					t.Errorf("reason %q does not say %q", v.Reason, w)
				}
			}
			if len(v.Reason) > 4096 || !utf8.ValidString(v.Reason) {
				t.Errorf("reason is %d bytes (valid UTF-8: %v), want at most 4096", len(v.Reason), utf8.ValidString(v.Reason))
			}
			if len(v.Inflight) != 0 {
				t.Errorf("a failed step left %d intents in flight", len(v.Inflight))
			}
		})
	}
	// Replay reproduces every fault (the comparison is byte for byte).
	before := len(allRecords(t, h.w))
	h.reopen()
	if after := len(allRecords(t, h.w)); after != before {
		t.Fatalf("journal %d records after replay, %d before", after, before)
	}
}
