package sdk_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/sdk"
)

type tally struct {
	N    int64  `cbor:"n"`
	Last string `cbor:"last,omitempty"`
}

type bump struct {
	By   int64  `cbor:"by"`
	Name string `cbor:"name"`
}

// testModule has one entrypoint per behaviour under test.
var testModule = func() *sdk.Module {
	m := sdk.NewModule("test/mod")
	sdk.Workflow(m, "tally", func(c *sdk.Ctx, st *tally, ev bump) (*tally, error) {
		if st == nil {
			st = &tally{}
		}
		st.N += ev.By
		st.Last = ev.Name
		if st.N == 0 {
			return nil, nil // a cell that sums to zero deletes itself
		}
		return st, nil
	})
	sdk.Workflow(m, "emit", func(c *sdk.Ctx, st *tally, ev bump) (*tally, error) {
		c.Emit("test/Bumped@1", ev)
		c.Emit("test/Variant@1", sdk.Tagged{Tag: "B", Value: ev})
		c.Effect("test/charge@1", map[string]any{"by": ev.By}, sdk.IdempotencyKey([]byte("k1")), sdk.IssuerRef("charge"))
		c.Effect("test/plain@1", ev)
		c.Timer(1_000, "t")
		c.Timer(2_000, "", sdk.IssuerRef("deadline"))
		c.Annotate("first")
		c.Annotate(map[string]any{"note": ev.Name})
		return st, nil
	})
	sdk.Workflow(m, "fail", func(c *sdk.Ctx, st *tally, ev bump) (*tally, error) {
		switch ev.Name {
		case "error":
			return nil, errors.New("boom")
		case "panic":
			panic("kaboom")
		case "nil":
			var p *tally
			return &tally{N: p.N}, nil
		case "index":
			return &tally{N: []int64{1}[ev.By]}, nil
		case "emit":
			c.Emit("test/Bad@1", make(chan int))
			c.Emit("test/Bad2@1", func() {})
		case "effect":
			c.Effect("test/bad@1", map[string]any{"f": func() {}})
		case "annotate":
			c.Annotate(make(chan int))
		case "state":
			return nil, nil
		}
		return st, nil
	})
	sdk.Workflow(m, "context", func(c *sdk.Ctx, st *sdk.Context, ev bump) (*sdk.Context, error) {
		wc, err := c.Context()
		if err != nil {
			return nil, err
		}
		again, _ := c.Context()
		if again != wc {
			return nil, errors.New("context decoded twice")
		}
		return wc, nil
	})
	sdk.Workflow(m, "key", func(c *sdk.Ctx, st *tally, ev bump) (*tally, error) {
		var k string
		if err := c.DecodeKey(&k); err != nil {
			return nil, err
		}
		return &tally{Last: k + "|" + c.Schema() + "|" + string(c.Key())}, nil
	})
	sdk.Workflow(m, "variant", func(c *sdk.Ctx, st *tally, ev sdk.Variant) (*tally, error) {
		switch ev.Tag {
		case "Bump":
			var b bump
			if err := ev.As(&b); err != nil {
				return nil, err
			}
			return &tally{N: b.By, Last: b.Name}, nil
		case "Receipt":
			var r sdk.ReceiptEnvelope
			if err := ev.As(&r); err != nil {
				return nil, err
			}
			var p sdk.TimerSetReceipt
			if err := r.DecodePayload(&p); err != nil {
				return nil, err
			}
			return &tally{N: int64(p.DeliveredAtNs), Last: r.Status + "/" + r.IssuerRef}, nil
		case "Rejected":
			var r sdk.ReceiptRejected
			if err := ev.As(&r); err != nil {
				return nil, err
			}
			return &tally{Last: "rejected: " + r.Error}, nil
		}
		return nil, errors.New("unknown arm " + ev.Tag)
	})
	sdk.RawWorkflow(m, "raw", func(c *sdk.Ctx, state, event []byte) ([]byte, error) {
		c.Emit("test/Raw@1", sdk.RawValue(event))
		if state == nil {
			return event, nil
		}
		return nil, nil
	})
	return m
}()

var builtin = testModule.Builtin("test/mod@1")

func cb(v any) []byte {
	if v == nil {
		return nil
	}
	return schemas.MustMarshal(v)
}

func step(t *testing.T, entry string, in *modules.Input) (*modules.Output, error) {
	t.Helper()
	fn, ok := builtin.Entrypoints[entry]
	if !ok {
		t.Fatalf("no entrypoint %s", entry)
	}
	return fn(in)
}

func input(state, event any) *modules.Input {
	return &modules.Input{Version: 1, State: cb(state), Event: modules.EventIn{Schema: "test/Ev@1", Value: cb(event)}}
}

func TestBuiltinNamesEveryEntrypoint(t *testing.T) {
	if builtin.Name != "test/mod" || builtin.Identity != "test/mod@1" {
		t.Fatalf("builtin %s %s", builtin.Name, builtin.Identity)
	}
	want := []string{"context", "emit", "fail", "key", "raw", "tally", "variant"}
	if got := testModule.Entrypoints(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Entrypoints() = %v, want %v", got, want)
	}
	if len(builtin.Entrypoints) != len(want) {
		t.Fatalf("builtin has %d entrypoints", len(builtin.Entrypoints))
	}
	b := modules.NewBuiltins()
	if err := b.Add(builtin); err != nil {
		t.Fatal(err)
	}
}

func TestTypedState(t *testing.T) {
	cases := []struct {
		name         string
		state, event any
		want         any // nil: deleted
	}{
		{"new cell", nil, map[string]any{"by": 2, "name": "a"}, map[string]any{"n": 2, "last": "a"}},
		{"existing cell", map[string]any{"n": 5, "last": "x"}, map[string]any{"by": -7, "name": "b"}, map[string]any{"n": -2, "last": "b"}},
		{"omitempty left out", map[string]any{"n": 5}, map[string]any{"by": 1, "name": ""}, map[string]any{"n": 6}},
		{"unknown fields ignored", map[string]any{"n": 1, "zz": true}, map[string]any{"by": 1, "name": "c", "extra": 1}, map[string]any{"n": 2, "last": "c"}},
		{"nil deletes", map[string]any{"n": 3}, map[string]any{"by": -3, "name": "d"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := step(t, "tally", input(c.state, c.event))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.State, cb(c.want)) {
				t.Fatalf("state %x, want %x", out.State, cb(c.want))
			}
			if c.want == nil && out.State != nil {
				t.Fatal("deleting state is not nil")
			}
			if out.DomainEvents != nil || out.Effects != nil || out.Ann != nil {
				t.Fatalf("emitted %+v", out)
			}
		})
	}
}

func TestEmitEffectTimerAnnotate(t *testing.T) {
	ev := map[string]any{"by": 3, "name": "x"}
	out, err := step(t, "emit", input(map[string]any{"n": 1}, ev))
	if err != nil {
		t.Fatal(err)
	}
	want := &modules.Output{
		State: cb(map[string]any{"n": 1}),
		DomainEvents: []modules.EventOut{
			{Schema: "test/Bumped@1", Value: cb(ev)},
			{Schema: "test/Variant@1", Value: cb(map[string]any{"$tag": "B", "$value": ev})},
		},
		Effects: []modules.EffectOut{
			{Effect: "test/charge@1", Params: cb(map[string]any{"by": 3}), IdempotencyKey: []byte("k1"), IssuerRef: "charge"},
			{Effect: "test/plain@1", Params: cb(ev)},
			{Effect: "sys/timer.set@1", Params: cb(map[string]any{"deliver_at_ns": 1000, "key": "t"})},
			{Effect: "sys/timer.set@1", Params: cb(map[string]any{"deliver_at_ns": 2000}), IssuerRef: "deadline"},
		},
		Ann: cb(map[string]any{"note": "x"}),
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("output\n%+v\nwant\n%+v", out, want)
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name, entry  string
		state, event any
		rawEvent     []byte
		want         string // exact fault, or prefix when it ends in "…"
	}{
		{name: "error", entry: "fail", event: map[string]any{"name": "error"}, want: "step returned an error: boom"},
		{name: "panic", entry: "fail", event: map[string]any{"name": "panic"}, want: "step panicked: kaboom"},
		{name: "nil dereference", entry: "fail", event: map[string]any{"name": "nil"},
			want: "step panicked: runtime error: invalid memory address or nil pointer dereference"},
		{name: "index", entry: "fail", event: map[string]any{"name": "index", "by": 5},
			want: "step panicked: runtime error: index out of range [5] with length 1"},
		{name: "emit", entry: "fail", event: map[string]any{"name": "emit"}, want: "emit test/Bad@1: cbor: unsupported type: chan int"},
		{name: "effect", entry: "fail", event: map[string]any{"name": "effect"}, want: "effect test/bad@1 params: cbor: unsupported type: func()"},
		{name: "annotate", entry: "fail", event: map[string]any{"name": "annotate"}, want: "annotation: cbor: unsupported type: chan int"},
		{name: "bad state", entry: "tally", state: map[string]any{"n": "x"}, event: map[string]any{"by": 1},
			want: "state does not decode into sdk_test.tally: cbor: cannot unmarshal UTF-8 text string into Go struct field sdk_test.tally.n of type int64"},
		{name: "state not a map", entry: "tally", state: []any{1}, event: map[string]any{"by": 1},
			want: "state does not decode into sdk_test.tally: …"},
		{name: "bad event", entry: "tally", event: map[string]any{"by": -1.5},
			want: "event does not decode into sdk_test.bump: …"},
		{name: "garbage event", entry: "tally", rawEvent: []byte{0xa1, 0x61},
			want: "event does not decode into sdk_test.bump: …"},
		{name: "trailing bytes", entry: "tally", rawEvent: []byte{0xa0, 0xa0},
			want: "event does not decode into sdk_test.bump: …"},
		{name: "not a variant", entry: "variant", event: map[string]any{"by": 1},
			want: `event does not decode into sdk.Variant: not a variant value (want a map of "$tag" and "$value")`},
		{name: "arm does not decode", entry: "variant", event: map[string]any{"$tag": "Bump", "$value": "x"},
			want: "step returned an error: variant arm Bump: …"},
		{name: "no context", entry: "context", event: map[string]any{},
			want: `step returned an error: workflow context missing (declare "context": "sys/WorkflowContext@1")`},
		{name: "unkeyed", entry: "key", event: map[string]any{}, want: "step returned an error: cell key: the workflow is not keyed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input(c.state, c.event)
			if c.rawEvent != nil {
				in.Event.Value = c.rawEvent
			}
			out, err := step(t, c.entry, in)
			if err == nil {
				t.Fatalf("no fault; output %+v", out)
			}
			var f modules.Fault
			if !errors.As(err, &f) {
				t.Fatalf("error %T %v is not a modules.Fault", err, err)
			}
			if out != nil {
				t.Fatalf("a fault with an output %+v", out)
			}
			if p, ok := strings.CutSuffix(c.want, "…"); ok {
				if !strings.HasPrefix(string(f), p) || len(f) == len(p) {
					t.Fatalf("fault %q, want %q and a reason", f, p)
				}
			} else if string(f) != c.want {
				t.Fatalf("fault %q\nwant  %q", f, c.want)
			}
		})
	}
}

func TestContext(t *testing.T) {
	wc := map[string]any{
		"now_ns": 11, "logical_now_ns": 12, "entropy": bytes.Repeat([]byte{7}, 32), "journal_height": 13,
		"event_hash": "sha256:e", "manifest_hash": "sha256:m", "workflow": "test/wf@1", "workflow_hash": "sha256:w",
		"key": []byte{0x61, 0x6b}, "cell_mode": true,
	}
	in := input(nil, map[string]any{})
	in.Ctx = cb(wc)
	out, err := step(t, "context", in)
	if err != nil {
		t.Fatal(err)
	}
	var got sdk.Context
	if err := sdk.Unmarshal(out.State, &got); err != nil {
		t.Fatal(err)
	}
	want := sdk.Context{NowNs: 11, LogicalNowNs: 12, Entropy: bytes.Repeat([]byte{7}, 32), JournalHeight: 13,
		EventHash: "sha256:e", ManifestHash: "sha256:m", Workflow: "test/wf@1", WorkflowHash: "sha256:w",
		Key: []byte{0x61, 0x6b}, CellMode: true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("context %+v\nwant %+v", got, want)
	}

	delete(wc, "key")
	wc["future_field"] = []any{1, map[string]any{"x": 2}}
	in.Ctx = cb(wc)
	if _, err := step(t, "context", in); err != nil {
		t.Fatalf("unknown context fields must be skipped: %v", err)
	}
	in.Ctx = cb(map[string]any{"now_ns": "soon"})
	_, err = step(t, "context", in)
	if err == nil || err.Error() != "step returned an error: workflow context does not decode: now_ns: want an unsigned integer, found a text string" {
		t.Fatalf("malformed context: %v", err)
	}
}

func TestKey(t *testing.T) {
	in := input(nil, map[string]any{})
	in.Event.Key = cb("k1")
	out, err := step(t, "key", in)
	if err != nil {
		t.Fatal(err)
	}
	if want := cb(map[string]any{"n": 0, "last": "k1|test/Ev@1|" + string(cb("k1"))}); !bytes.Equal(out.State, want) {
		t.Fatalf("state %x, want %x", out.State, want)
	}
}

func TestVariantEvents(t *testing.T) {
	arm := func(tag string, v any) map[string]any { return map[string]any{"$tag": tag, "$value": v} }
	cases := []struct {
		name  string
		event any
		want  any
	}{
		{"arm", arm("Bump", map[string]any{"by": 4, "name": "v"}), map[string]any{"n": 4, "last": "v"}},
		{"receipt", arm("Receipt", map[string]any{"effect": "sys/timer.set@1", "status": "timeout", "issuer_ref": "r",
			"payload": cb(map[string]any{"delivered_at_ns": 77})}), map[string]any{"n": 77, "last": "timeout/r"}},
		{"rejected", arm("Rejected", map[string]any{"effect": "e", "error": "no"}), map[string]any{"n": 0, "last": "rejected: no"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := step(t, "variant", input(nil, c.event))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.State, cb(c.want)) {
				t.Fatalf("state %x, want %x", out.State, cb(c.want))
			}
		})
	}
}

func TestRawWorkflow(t *testing.T) {
	ev := cb(map[string]any{"any": []any{1, "thing"}})
	in := input(nil, nil)
	in.Event.Value = ev
	out, err := step(t, "raw", in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.State, ev) || len(out.DomainEvents) != 1 || !bytes.Equal(out.DomainEvents[0].Value, ev) {
		t.Fatalf("raw output %+v", out)
	}
	in.State = ev
	if out, err = step(t, "raw", in); err != nil || out.State != nil {
		t.Fatalf("raw delete: %+v %v", out, err)
	}
}

func TestRegistrationMistakesPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"twice": func() {
			m := sdk.NewModule("x")
			sdk.RawWorkflow(m, "a", nil)
			sdk.RawWorkflow(m, "a", nil)
		},
		"no entrypoint name": func() {
			sdk.Workflow(sdk.NewModule("x"), "", func(*sdk.Ctx, *tally, bump) (*tally, error) { return nil, nil })
		},
		"no module name":  func() { sdk.NewModule("") },
		"export natively": func() { sdk.Export(sdk.NewModule("x")) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestConcurrentSteps runs one module from many goroutines (go test -race).
func TestConcurrentSteps(t *testing.T) {
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			var err error
			for i := 0; i < 200 && err == nil; i++ {
				var out *modules.Output
				out, err = builtin.Entrypoints["emit"](input(map[string]any{"n": g}, map[string]any{"by": i, "name": "c"}))
				if err == nil && len(out.Effects) != 4 {
					err = errors.New("lost an effect")
				}
			}
			done <- err
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
