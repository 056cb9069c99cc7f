// Package examples_test runs every example world twice, once with its
// workflows as wasm (compiled from examples/workflows by the build the demo
// and `aosd build` use) and once with the same Go source linked in natively,
// and checks the two journals are byte-identical: one source, two targets.
package examples_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/examples/workflows"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journalcheck"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

func TestMain(m *testing.M) {
	code := m.Run()
	built.Cleanup()
	os.Exit(code)
}

// stepClock and fixed entropy make stamps a function of the run.
type stepClock struct{ now uint64 }

func (c *stepClock) NowNs() uint64 { c.now += 1_000_000; return c.now }

type zeroEntropy struct{}

func (zeroEntropy) Fill(p []byte) { clear(p) }

// capture records intents as the kernel publishes them.
type capture struct {
	mu     sync.Mutex
	opened []kernel.OpenIntent
}

func (c *capture) Publish(o []kernel.OpenIntent, _ []schemas.Hash) {
	c.mu.Lock()
	c.opened = append(c.opened, o...)
	c.mu.Unlock()
}

func (c *capture) take() []kernel.OpenIntent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.opened
	c.opened = nil
	return out
}

var executorKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))

// step is one input of a scenario: an event, or settling every open intent
// (a charge succeeds, a timer fires at its due time).
type step struct {
	schema, json string
	settle       bool
}

func ev(schema, js string) step { return step{schema: schema, json: js} }

var settle = step{settle: true}

var scenarios = map[string][]step{
	"counter": {
		ev("com.example/CountEvent@1", `{"key":"a","by":2}`),
		ev("com.example/CountEvent@1", `{"key":"b","by":5}`),
		ev("com.example/CountEvent@1", `{"key":"a","by":3}`),
	},
	"orders": {
		ev("com.example/OrderCreated@1", `{"order_id":"o1","amount_cents":100,"customer":"ada"}`),
		ev("com.example/OrderCreated@1", `{"order_id":"o2","amount_cents":100,"customer":"ada"}`),
		ev("com.example/OrderCreated@1", `{"order_id":"o3","amount_cents":250,"customer":"bob"}`),
		ev("com.example/OrderCancel@1", `{"order_id":"o2"}`),
		ev("com.example/OrderCancel@1", `{"order_id":"nobody"}`),
		settle,
		ev("com.example/OrderCreated@1", `{"order_id":"o1","amount_cents":999,"customer":"eve"}`),
	},
	"notes": {
		ev("com.example/NoteEvent@1", `{"$tag":"Created","$value":{"note_id":"n1","title":"t"}}`),
		ev("com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n1","body":"one"}}`),
		ev("com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n1","body":"two"}}`),
		ev("com.example/NoteEvent@1", `{"$tag":"Archived","$value":{"note_id":"n1"}}`),
		ev("com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n1","body":"late"}}`),
		ev("com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n2","body":"nobody"}}`),
	},
	"reminders": {
		ev("com.example/ReminderSet@1", `{"reminder_id":"r1","text":"tea","delay_ms":0}`),
		ev("com.example/ReminderSet@1", `{"reminder_id":"r2","text":"call","delay_ms":60000}`),
		ev("com.example/ReminderSet@1", `{"reminder_id":"r2","text":"call later","delay_ms":120000}`),
		settle,
	},
	"choreography": {
		ev("com.example/OrderPlaced@1", `{"order_id":"o1","amount_cents":100}`),
		ev("com.example/OrderPlaced@1", `{"order_id":"o2","amount_cents":250}`),
		ev("com.example/OrderPlaced@1", `{"order_id":"o1","amount_cents":100}`),
	},
}

// receiptFor answers an intent as a cooperative executor would.
func receiptFor(t *testing.T, it kernel.OpenIntent) receipts.SignedReceipt {
	var payload any
	switch it.Effect {
	case "sys/timer.set@1":
		var p struct {
			DeliverAt uint64 `cbor:"deliver_at_ns"`
			Key       string `cbor:"key"`
		}
		if err := schemas.UnmarshalTrusted(it.Params, &p); err != nil {
			t.Fatal(err)
		}
		payload = map[string]any{"delivered_at_ns": p.DeliverAt, "key": p.Key}
	case "com.example/payment.charge@1":
		payload = map[string]any{"charge_id": fmt.Sprintf("ch-%d", it.EmittedAt), "status": "succeeded"}
	default:
		t.Fatalf("no receipt for effect %s", it.Effect)
	}
	return receipts.Sign(executorKey, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: it.Effect, Executor: receipts.BuiltinExecutor,
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(payload), Attempt: 1})
}

type run struct {
	records     []journal.Record
	cells       map[string]string // workflow + key -> status, state hash
	nativeSteps int               // steps the linked-in code ran
}

// runWorld applies the example at dir and plays its scenario. native maps
// module names to be linked in by artifact hash; nil runs wasm.
func runWorld(t *testing.T, dir string, m *manifest.Manifest, steps []step, native bool) run {
	t.Helper()
	ctx := context.Background()
	db, err := badgerdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, pub, nativeSteps := openWorld(t, db, m, native)
	defer w.Close()
	if _, err := w.Apply(ctx, m, false); err != nil {
		t.Fatalf("apply %s: %v", dir, err)
	}
	play(t, w, pub, steps)
	checkJournal(t, db)
	var r run
	r.cells = map[string]string{}
	if err := w.Journal().Read(1, func(rec journal.Record) (bool, error) {
		r.records = append(r.records, rec)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, wf := range m.Workflows {
		if !wf.Keyed() {
			v, err := w.Cell(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			js, err := schemas.ToJSON(v.State)
			if v.State == nil || err != nil {
				js = []byte("null")
			}
			r.cells[name] = string(js)
			continue
		}
		cells, err := w.Cells(ctx, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			r.cells[name+" "+string(records.KeyJSON(c.Key))] = fmt.Sprintf("%s %s %d", c.Status, c.StateHash, c.Size)
		}
	}
	r.nativeSteps = int(nativeSteps.Load())
	return r
}

// openWorld opens a world on db with deterministic stamps, the executor key
// and, when native, the example workflows linked in by artifact hash.
func openWorld(t *testing.T, db *badgerdb.DB, m *manifest.Manifest, native bool) (*kernel.World, *capture, *atomic.Int64) {
	t.Helper()
	kr := receipts.NewKeyring()
	if err := kr.Add(receipts.BuiltinExecutor, executorKey.Public().(ed25519.PublicKey), []string{"sys/timer.set@1", "com.example/payment.charge@1"}); err != nil {
		t.Fatal(err)
	}
	b := modules.NewBuiltins()
	nativeSteps := new(atomic.Int64)
	if native {
		// Each module's native build declares its wasm artifact's hash as
		// its identity, so it stands in for it. The artifact is found by
		// the Go package it was built from.
		hashes := map[string]string{}
		for _, md := range m.Modules {
			hashes[path.Base(path.Dir(md.Runtime.Source))] = md.Runtime.ArtifactHash
		}
		all := modules.NewBuiltins()
		workflows.Register(all, func(module string) string {
			if h, ok := hashes[path.Base(module)]; ok {
				return h
			}
			return workflows.Identity(module)
		})
		for _, n := range all.Names() {
			mod, _ := all.Get(n)
			counted := modules.Builtin{Name: mod.Name, Identity: mod.Identity, Entrypoints: map[string]modules.StepFunc{}}
			for e, fn := range mod.Entrypoints {
				counted.Entrypoints[e] = func(in *modules.Input) (*modules.Output, error) {
					nativeSteps.Add(1)
					return fn(in)
				}
			}
			b.MustAdd(counted)
		}
	}
	pub := &capture{}
	w, err := kernel.Open(storesOf(db), kernel.Config{Clock: &stepClock{}, Entropy: zeroEntropy{}, Builtins: b,
		Keyring: kr, Publisher: pub, Wasm: wasmtest.Engine(t, built.WasmCache(t)), StepTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	return w, pub, nativeSteps
}

// play submits a scenario's events and settles its intents.
func play(t *testing.T, w *kernel.World, pub *capture, steps []step) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		if s.settle {
			for _, it := range pub.take() {
				if _, err := w.SubmitReceipt(ctx, receiptFor(t, it)); err != nil {
					t.Fatalf("step %d: receipt for %s: %v", i, it.Effect, err)
				}
			}
			continue
		}
		if _, err := w.Submit(ctx, kernel.Event{Schema: s.schema, JSON: json.RawMessage(s.json)}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func TestExampleWorldsWasmEqualsNative(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			dir := built.Path(t, name)
			m, err := manifest.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			wasmRun := runWorld(t, dir, m, scenarios[name], false)
			nativeRun := runWorld(t, dir, m, scenarios[name], true)
			steps := 0
			for _, r := range wasmRun.records {
				if r.Kind == journal.KindStep || r.Kind == journal.KindFault {
					steps++
				}
			}
			if wasmRun.nativeSteps != 0 || nativeRun.nativeSteps != steps {
				t.Fatalf("native code ran %d steps in the wasm world and %d of %d in the native one", wasmRun.nativeSteps, nativeRun.nativeSteps, steps)
			}
			if len(wasmRun.records) < 2*len(scenarios[name]) {
				t.Fatalf("only %d records: the scenario did not run", len(wasmRun.records))
			}
			if len(wasmRun.records) != len(nativeRun.records) {
				t.Fatalf("wasm journal has %d records, native %d", len(wasmRun.records), len(nativeRun.records))
			}
			faults := 0
			for i := range wasmRun.records {
				a, b := wasmRun.records[i], nativeRun.records[i]
				if a.Seq != b.Seq || a.Kind != b.Kind || !bytes.Equal(a.Body, b.Body) {
					da, _ := records.Decode(a)
					db, _ := records.Decode(b)
					t.Fatalf("record %d differs:\nwasm   %v\nnative %v", a.Seq, da, db)
				}
				if a.Kind == journal.KindFault {
					faults++
				}
			}
			if faults > 0 {
				t.Fatalf("the scenario faulted %d times: it should exercise the workflows, not their failure", faults)
			}
			if len(wasmRun.cells) == 0 {
				t.Fatal("no cells")
			}
			for k, v := range wasmRun.cells {
				if nativeRun.cells[k] != v {
					t.Errorf("cell %s: wasm %s, native %s", k, v, nativeRun.cells[k])
				}
			}
		})
	}
}

// checkJournal fails the test unless the world's journal keeps every rule
// of the journal check (docs/journal-check.md).
func checkJournal(t *testing.T, db *badgerdb.DB) {
	t.Helper()
	rep, err := journalcheck.Check(context.Background(), db.Journal(), journalcheck.Options{Objects: db.CAS().Get})
	if err != nil {
		t.Fatalf("journal check: %v", err)
	}
	for _, v := range rep.Violations {
		t.Errorf("journal check: %s", v)
	}
	if !rep.OK() || rep.Records == 0 {
		t.Fatalf("journal check: %d records checked, %d violations (%d omitted)", rep.Records, len(rep.Violations), rep.Omitted)
	}
}

// storesOf is the world's storage ports over its Badger database.
func storesOf(db *badgerdb.DB) kernel.Stores {
	return kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}
}
