package examples_test

// Every behaviour examples/manifests/EXAMPLES.md states, pinned in a real
// world: the example's built wasm module on Badger on disk, events submitted
// as a user sends them, receipts signed with ed25519 as an executor signs
// them, and the cells, intents and emitted events read back from the world
// and its journal. Each test is named after the doc line it pins.

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// docWorld is one example world, applied and ready for events.
type docWorld struct {
	t *testing.T
	w *kernel.World
}

func newDocWorld(t *testing.T, name string) *docWorld {
	t.Helper()
	m, err := manifest.Load(built.Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	kr := receipts.NewKeyring()
	if err := kr.Add(receipts.BuiltinExecutor, executorKey.Public().(ed25519.PublicKey), []string{"sys/timer.set@1", "com.example/payment.charge@1"}); err != nil {
		t.Fatal(err)
	}
	w, err := kernel.Open(storesOf(db), kernel.Config{Clock: &stepClock{}, Entropy: zeroEntropy{}, Builtins: modules.NewBuiltins(),
		Keyring: kr, Wasm: wasmtest.Engine(t, built.WasmCache(t)), StepTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Apply(context.Background(), m, false); err != nil {
		t.Fatalf("apply %s: %v", name, err)
	}
	return &docWorld{t: t, w: w}
}

// send submits one event as `aosd send` does and returns its seq.
func (d *docWorld) send(schema, js string) uint64 {
	d.t.Helper()
	seqs, err := d.w.Submit(context.Background(), kernel.Event{Schema: schema, JSON: json.RawMessage(js)})
	if err != nil {
		d.t.Fatalf("send %s %s: %v", schema, js, err)
	}
	return seqs[0]
}

// cell is the state of workflow's cell at the string key, as JSON values;
// it fails the test if there is no such cell.
func (d *docWorld) cell(workflow, key string) map[string]any {
	d.t.Helper()
	var k []byte
	if key != "" {
		k = schemas.MustMarshal(key)
	}
	v, err := d.w.Cell(context.Background(), workflow, k)
	if err != nil {
		d.t.Fatalf("cell %s %q: %v", workflow, key, err)
	}
	if v.State == nil {
		d.t.Fatalf("cell %s %q has no state", workflow, key)
	}
	js, err := schemas.ToJSON(v.State)
	if err != nil {
		d.t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(js, &got); err != nil {
		d.t.Fatal(err)
	}
	return got
}

// wantCell checks the cell's state equals the JSON object want.
func (d *docWorld) wantCell(workflow, key, want string) {
	d.t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		d.t.Fatal(err)
	}
	if got := d.cell(workflow, key); !reflect.DeepEqual(got, w) {
		gj, _ := json.Marshal(got)
		d.t.Fatalf("cell %s %q = %s, want %s", workflow, key, gj, want)
	}
}

// wantNoCell checks the workflow has no cell at key.
func (d *docWorld) wantNoCell(workflow, key string) {
	d.t.Helper()
	v, err := d.w.Cell(context.Background(), workflow, schemas.MustMarshal(key))
	if !errors.Is(err, kernel.ErrNoCell) {
		d.t.Fatalf("cell %s %q: want none, got %+v (err %v)", workflow, key, v, err)
	}
}

// journal decodes every record of kind.
func (d *docWorld) journal(kind journal.Kind) []any {
	d.t.Helper()
	var out []any
	if err := d.w.Journal().Read(1, func(r journal.Record) (bool, error) {
		if r.Kind == kind {
			v, err := records.Decode(r)
			if err != nil {
				return false, err
			}
			out = append(out, v)
		}
		return true, nil
	}); err != nil {
		d.t.Fatal(err)
	}
	return out
}

// intents is every intent the world has journaled, in order.
func (d *docWorld) intents() []*records.IntentRec {
	var out []*records.IntentRec
	for _, v := range d.journal(journal.KindIntent) {
		out = append(out, v.(*records.IntentRec))
	}
	return out
}

// stampOf is the stamp of the event at seq.
func (d *docWorld) stampOf(seq uint64) records.Stamp {
	d.t.Helper()
	var st records.Stamp
	found := false
	if err := d.w.Journal().Read(seq, func(r journal.Record) (bool, error) {
		v, err := records.Decode(r)
		if err != nil {
			return false, err
		}
		st, found = v.(*records.EventRec).Stamp, true
		return false, nil
	}); err != nil || !found {
		d.t.Fatalf("event %d: %v", seq, err)
	}
	return st
}

// pending is the world's open intent with effect and origin key, which must
// be the only one.
func (d *docWorld) pending(effect, key string) kernel.OpenIntent {
	d.t.Helper()
	all, err := d.w.PendingIntents(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	var found []kernel.OpenIntent
	for _, it := range all {
		if it.Effect == effect && string(it.OriginKey) == string(schemas.MustMarshal(key)) {
			found = append(found, it)
		}
	}
	if len(found) != 1 {
		d.t.Fatalf("want one open %s intent for %q, have %d of %d", effect, key, len(found), len(all))
	}
	return found[0]
}

// receipt signs and submits a receipt for it as the executor would.
func (d *docWorld) receipt(it kernel.OpenIntent, status receipts.Status, payload any) {
	d.t.Helper()
	sr := receipts.Sign(executorKey, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: it.Effect, Executor: receipts.BuiltinExecutor,
		Status: status, Payload: schemas.MustMarshal(payload), Attempt: 1})
	if _, err := d.w.SubmitReceipt(context.Background(), sr); err != nil {
		d.t.Fatalf("receipt for %s: %v", it.Effect, err)
	}
}

// fire answers a timer intent as the timer executor does: delivered at its
// deliver_at_ns.
func (d *docWorld) fire(it kernel.OpenIntent) {
	d.t.Helper()
	p := timerParams(d.t, it.Params)
	d.receipt(it, receipts.StatusOK, map[string]any{"delivered_at_ns": p.DeliverAtNs, "key": p.Key})
}

type timerSet struct {
	DeliverAtNs uint64 `cbor:"deliver_at_ns"`
	Key         string `cbor:"key"`
}

func timerParams(t *testing.T, b []byte) timerSet {
	t.Helper()
	var p timerSet
	if err := schemas.UnmarshalTrusted(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (d *docWorld) charge(key string, status receipts.Status, chargeID, outcome string) {
	d.t.Helper()
	payload := map[string]any{}
	if status == receipts.StatusOK {
		payload = map[string]any{"charge_id": chargeID, "status": outcome}
	}
	d.receipt(d.pending("com.example/payment.charge@1", key), status, payload)
}

func (d *docWorld) wantQuiescent() {
	d.t.Helper()
	s, err := d.w.Status(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	if !s.Quiescent || s.Inflight != 0 {
		d.t.Fatalf("world not quiescent: %+v", s)
	}
}

// ---- counter ----

const counterWF = "com.example/counter.step@1"

// EXAMPLES.md, counter "Expected": a+2, b+5, a+3 leave a -> 5, b -> 5.
func TestDocCounterExpected(t *testing.T) {
	d := newDocWorld(t, "counter")
	d.send("com.example/CountEvent@1", `{"key":"a","by":2}`)
	d.send("com.example/CountEvent@1", `{"key":"b","by":5}`)
	d.send("com.example/CountEvent@1", `{"key":"a","by":3}`)
	d.wantCell(counterWF, "a", `{"count":5}`)
	d.wantCell(counterWF, "b", `{"count":5}`)
}

// counter Step: "Never deletes the cell", not even at a count of zero.
func TestDocCounterNeverDeletesTheCell(t *testing.T) {
	d := newDocWorld(t, "counter")
	d.send("com.example/CountEvent@1", `{"key":"a","by":2}`)
	d.send("com.example/CountEvent@1", `{"key":"a","by":-2}`)
	d.wantCell(counterWF, "a", `{"count":0}`)
}

// ---- orders ----

const (
	orderWF   = "com.example/order.step@1"
	chargeFX  = "com.example/payment.charge@1"
	timerFX   = "sys/timer.set@1"
	created   = "com.example/OrderCreated@1"
	cancel    = "com.example/OrderCancel@1"
	expiry    = 15 * 60 * 1_000_000_000
	order1    = `{"order_id":"o1","amount_cents":500,"customer":"ada"}`
	awaiting1 = `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"awaiting_payment"}`
)

// orders Step, Created with state null: the state, then the charge
// (params, idempotency_key = order_id, issuer_ref "charge") and the timer
// (deliver_at_ns = logical now + 15 min, key = order_id, issuer_ref
// "deadline").
func TestDocOrderCreatedEmitsChargeAndDeadline(t *testing.T) {
	d := newDocWorld(t, "orders")
	seq := d.send(created, order1)
	d.wantCell(orderWF, "o1", awaiting1)
	its := d.intents()
	if len(its) != 2 {
		t.Fatalf("want 2 intents, got %d", len(its))
	}
	c, tm := its[0], its[1]
	if c.Effect != chargeFX || tm.Effect != timerFX {
		t.Fatalf("effects %s, %s; want %s then %s", c.Effect, tm.Effect, chargeFX, timerFX)
	}
	params := jsonValue(t, c.Params)
	if want := map[string]any{"order_id": "o1", "amount_cents": 500.0, "customer": "ada"}; !reflect.DeepEqual(params, want) {
		t.Errorf("charge params %v, want %v", params, want)
	}
	if string(c.IdempotencyKey) != "o1" || c.IssuerRef != "charge" {
		t.Errorf("charge idempotency_key %q issuer_ref %q, want \"o1\" and \"charge\"", c.IdempotencyKey, c.IssuerRef)
	}
	p := timerParams(t, tm.Params)
	if now := d.stampOf(seq).LogicalNs; p.DeliverAtNs != now+expiry || p.Key != "o1" {
		t.Errorf("timer params %+v, want deliver_at_ns %d (logical now %d + 15 min) and key \"o1\"", p, now+expiry, now)
	}
	if tm.IssuerRef != "deadline" {
		t.Errorf("timer issuer_ref %q, want \"deadline\"", tm.IssuerRef)
	}
}

// "`Created` for an existing cell: ignored (state unchanged, nothing
// emitted)", whatever its status.
func TestDocOrderSecondCreatedIgnored(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.send(created, `{"order_id":"o1","amount_cents":999,"customer":"eve"}`)
	d.wantCell(orderWF, "o1", awaiting1)
	if n := len(d.intents()); n != 2 {
		t.Fatalf("%d intents: the second Created emitted effects", n)
	}
	d.charge("o1", receipts.StatusOK, "ch-1", "succeeded")
	d.send(created, `{"order_id":"o1","amount_cents":1,"customer":"bob"}`)
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"paid","charge_id":"ch-1"}`)
	if n := len(d.intents()); n != 2 {
		t.Fatalf("%d intents: a Created for a paid order emitted effects", n)
	}
}

// "Expected: Created -> charge ok receipt -> `paid` (the later timer receipt
// changes nothing)".
func TestDocOrderChargeOkPays(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.charge("o1", receipts.StatusOK, "ch-1", "succeeded")
	paid := `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"paid","charge_id":"ch-1"}`
	d.wantCell(orderWF, "o1", paid)
	d.fire(d.pending(timerFX, "o1"))
	d.wantCell(orderWF, "o1", paid)
	d.wantQuiescent()
}

// "anything else => `payment_failed`": a declined charge, an error receipt.
func TestDocOrderChargeNotSucceededFails(t *testing.T) {
	for _, c := range []struct {
		name    string
		status  receipts.Status
		outcome string
	}{{"declined", receipts.StatusOK, "declined"}, {"error", receipts.StatusError, ""}, {"timeout", receipts.StatusTimeout, ""}} {
		t.Run(c.name, func(t *testing.T) {
			d := newDocWorld(t, "orders")
			d.send(created, order1)
			d.charge("o1", c.status, "ch-1", c.outcome)
			d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"payment_failed"}`)
		})
	}
}

// "`Rejected`: if `awaiting_payment`, status `payment_failed`": a receipt
// whose payload fails ChargeReceipt@1 comes back as the Rejected arm.
func TestDocOrderRejectedFails(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.receipt(d.pending(chargeFX, "o1"), receipts.StatusOK, map[string]any{"charge_id": "ch-1", "status": "maybe"})
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"payment_failed"}`)
}

// "Expected: ... Created -> timer receipt first -> `expired`"; the charge
// that succeeds after keeps `expired` and records its charge_id.
func TestDocOrderTimerFirstExpires(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.fire(d.pending(timerFX, "o1"))
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"expired"}`)
	d.charge("o1", receipts.StatusOK, "ch-late", "succeeded")
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"expired","charge_id":"ch-late"}`)
}

// "Expected: ... Created -> Cancel -> `cancelled`, and a charge that then
// succeeds leaves it `cancelled` with the `charge_id`"; the deadline after
// changes nothing.
func TestDocOrderCancelBeforeChargeReceipt(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.send(cancel, `{"order_id":"o1"}`)
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"cancelled"}`)
	d.charge("o1", receipts.StatusOK, "ch-late", "succeeded")
	late := `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"cancelled","charge_id":"ch-late"}`
	d.wantCell(orderWF, "o1", late)
	d.fire(d.pending(timerFX, "o1"))
	d.wantCell(orderWF, "o1", late)
	d.wantQuiescent()
}

// "a declined or failed charge changes nothing" for a cancelled order.
func TestDocOrderCancelThenDeclinedRecordsNothing(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.send(cancel, `{"order_id":"o1"}`)
	d.charge("o1", receipts.StatusOK, "ch-x", "declined")
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"cancelled"}`)
}

// "`Cancel`: if status is `awaiting_payment`, status `cancelled`; otherwise
// unchanged."
func TestDocOrderCancelAfterPaidIgnored(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, order1)
	d.charge("o1", receipts.StatusOK, "ch-1", "succeeded")
	d.send(cancel, `{"order_id":"o1"}`)
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"paid","charge_id":"ch-1"}`)
}

// "Cancel for a missing cell: return state null (no cell is created)."
func TestDocOrderCancelMissingCreatesNoCell(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(cancel, `{"order_id":"nobody"}`)
	d.wantNoCell(orderWF, "nobody")
}

// "Two orders with identical params get different intents and each receipt
// wakes only its own order."
func TestDocOrderReceiptsWakeOnlyTheirOrder(t *testing.T) {
	d := newDocWorld(t, "orders")
	d.send(created, `{"order_id":"o1","amount_cents":100,"customer":"ada"}`)
	d.send(created, `{"order_id":"o2","amount_cents":100,"customer":"ada"}`)
	c1, c2 := d.pending(chargeFX, "o1"), d.pending(chargeFX, "o2")
	if c1.Hash == c2.Hash {
		t.Fatal("the two orders' charges share an intent")
	}
	d.charge("o1", receipts.StatusOK, "ch-1", "succeeded")
	d.wantCell(orderWF, "o1", `{"order_id":"o1","amount_cents":100,"customer":"ada","status":"paid","charge_id":"ch-1"}`)
	d.wantCell(orderWF, "o2", `{"order_id":"o2","amount_cents":100,"customer":"ada","status":"awaiting_payment"}`)
}

// ---- notes ----

const (
	noteWF   = "com.example/note.step@1"
	noteEv   = "com.example/NoteEvent@1"
	createN1 = `{"$tag":"Created","$value":{"note_id":"n1","title":"t"}}`
)

// "`Created` on null state => `{title, body:"", edits:0, archived:false}`".
func TestDocNoteCreated(t *testing.T) {
	d := newDocWorld(t, "notes")
	d.send(noteEv, createN1)
	d.wantCell(noteWF, "n1", `{"title":"t","body":"","edits":0,"archived":false}`)
}

// "(on an existing note: ignored, the first title stays)".
func TestDocNoteSecondCreatedIgnored(t *testing.T) {
	d := newDocWorld(t, "notes")
	d.send(noteEv, createN1)
	d.send(noteEv, `{"$tag":"Edited","$value":{"note_id":"n1","body":"b"}}`)
	d.send(noteEv, `{"$tag":"Created","$value":{"note_id":"n1","title":"other"}}`)
	d.wantCell(noteWF, "n1", `{"title":"t","body":"b","edits":1,"archived":false}`)
}

// "`Edited` ... on a missing ... note: ignored (null state stays null: no
// cell is created)".
func TestDocNoteEditedMissingCreatesNoCell(t *testing.T) {
	d := newDocWorld(t, "notes")
	d.send(noteEv, `{"$tag":"Edited","$value":{"note_id":"n2","body":"nobody"}}`)
	d.wantNoCell(noteWF, "n2")
}

// "`Archived` ... on a missing note: ignored (null stays null)".
func TestDocNoteArchivedMissingCreatesNoCell(t *testing.T) {
	d := newDocWorld(t, "notes")
	d.send(noteEv, `{"$tag":"Archived","$value":{"note_id":"n2"}}`)
	d.wantNoCell(noteWF, "n2")
}

// "An archived note ignores every event": Edited and Created after Archived.
func TestDocNoteArchivedIgnoresEverything(t *testing.T) {
	d := newDocWorld(t, "notes")
	d.send(noteEv, createN1)
	d.send(noteEv, `{"$tag":"Archived","$value":{"note_id":"n1"}}`)
	d.send(noteEv, `{"$tag":"Edited","$value":{"note_id":"n1","body":"late"}}`)
	d.send(noteEv, `{"$tag":"Created","$value":{"note_id":"n1","title":"again"}}`)
	d.wantCell(noteWF, "n1", `{"title":"t","body":"","edits":0,"archived":true}`)
}

// notes "Expected: Created n1, Edited n1 twice, Archived n1, Edited n1 =>
// `{title, body: <second edit>, edits:2, archived:true}`".
func TestDocNotesExpected(t *testing.T) {
	d := newDocWorld(t, "notes")
	d.send(noteEv, createN1)
	d.send(noteEv, `{"$tag":"Edited","$value":{"note_id":"n1","body":"one"}}`)
	d.send(noteEv, `{"$tag":"Edited","$value":{"note_id":"n1","body":"two"}}`)
	d.send(noteEv, `{"$tag":"Archived","$value":{"note_id":"n1"}}`)
	d.send(noteEv, `{"$tag":"Edited","$value":{"note_id":"n1","body":"late"}}`)
	d.wantCell(noteWF, "n1", `{"title":"t","body":"two","edits":2,"archived":true}`)
}

// ---- reminders ----

const (
	reminderWF = "com.example/reminder.step@1"
	reminderEv = "com.example/ReminderSet@1"
)

// reminders Step: "`Set` => state `{reminder_id, text, due_ns:
// ctx.logical_now_ns + delay_ms*1e6, status:"scheduled"}` and emit
// `sys/timer.set@1` `{"deliver_at_ns": due_ns, "key": reminder_id}`".
func TestDocReminderSetSchedulesTimer(t *testing.T) {
	d := newDocWorld(t, "reminders")
	seq := d.send(reminderEv, `{"reminder_id":"r1","text":"tea","delay_ms":60000}`)
	due := d.stampOf(seq).LogicalNs + 60000*1_000_000
	st := d.cell(reminderWF, "r1")
	if st["status"] != "scheduled" || st["text"] != "tea" || st["reminder_id"] != "r1" || uint64(st["due_ns"].(float64)) != due {
		t.Fatalf("state %v, want scheduled, text tea, due_ns %d", st, due)
	}
	if p := timerParams(t, d.pending(timerFX, "r1").Params); p.DeliverAtNs != due || p.Key != "r1" {
		t.Fatalf("timer params %+v, want deliver_at_ns %d key r1", p, due)
	}
}

// reminders "Expected: Set with delay 0 => after the timer executor runs, the
// cell is `fired` and the world is quiescent."
func TestDocReminderFiresWhenDue(t *testing.T) {
	d := newDocWorld(t, "reminders")
	seq := d.send(reminderEv, `{"reminder_id":"r1","text":"tea","delay_ms":0}`)
	d.fire(d.pending(timerFX, "r1"))
	due := d.stampOf(seq).LogicalNs
	st := d.cell(reminderWF, "r1")
	if st["status"] != "fired" || uint64(st["fired_at_ns"].(float64)) != due {
		t.Fatalf("state %v, want fired at %d", st, due)
	}
	d.wantQuiescent()
}

// "A `Set` for a cell that is still `scheduled` replaces text and due time
// and sets a new timer; the old timer's receipt is then ignored because its
// `delivered_at_ns` is before the new `due_ns`."
func TestDocReminderSecondSetReschedules(t *testing.T) {
	d := newDocWorld(t, "reminders")
	d.send(reminderEv, `{"reminder_id":"r1","text":"call","delay_ms":60000}`)
	old := d.pending(timerFX, "r1")
	seq := d.send(reminderEv, `{"reminder_id":"r1","text":"call later","delay_ms":120000}`)
	due := d.stampOf(seq).LogicalNs + 120000*1_000_000
	st := d.cell(reminderWF, "r1")
	if st["text"] != "call later" || uint64(st["due_ns"].(float64)) != due || st["status"] != "scheduled" {
		t.Fatalf("state %v, want text replaced, due_ns %d, scheduled", st, due)
	}
	all, err := d.w.PendingIntents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("want the old and the new timer open, have %d intents", len(all))
	}
	i := slices.IndexFunc(all, func(it kernel.OpenIntent) bool { return it.Hash != old.Hash })
	if i < 0 {
		t.Fatal("no new timer")
	}
	fresh := all[i]
	if p := timerParams(t, fresh.Params); p.DeliverAtNs != due {
		t.Fatalf("new timer at %d, want %d", p.DeliverAtNs, due)
	}
	d.fire(old)
	if st := d.cell(reminderWF, "r1"); st["status"] != "scheduled" {
		t.Fatalf("the old timer's receipt fired the reminder: %v", st)
	}
	d.fire(fresh)
	st = d.cell(reminderWF, "r1")
	if st["status"] != "fired" || st["text"] != "call later" || uint64(st["fired_at_ns"].(float64)) != due {
		t.Fatalf("state %v, want fired at %d", st, due)
	}
	d.wantQuiescent()
}

// "(if the new due time is the earlier one, the new timer fires first and
// the old receipt finds the reminder `fired`)": it changes nothing.
func TestDocReminderSecondSetEarlierFiresOnce(t *testing.T) {
	d := newDocWorld(t, "reminders")
	d.send(reminderEv, `{"reminder_id":"r1","text":"call","delay_ms":120000}`)
	old := d.pending(timerFX, "r1")
	seq := d.send(reminderEv, `{"reminder_id":"r1","text":"sooner","delay_ms":1000}`)
	due := d.stampOf(seq).LogicalNs + 1000*1_000_000
	all, err := d.w.PendingIntents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(it kernel.OpenIntent) bool { return it.Hash != old.Hash })
	if i < 0 {
		t.Fatal("no new timer")
	}
	d.fire(all[i])
	d.fire(old)
	st := d.cell(reminderWF, "r1")
	if st["status"] != "fired" || st["text"] != "sooner" || uint64(st["fired_at_ns"].(float64)) != due {
		t.Fatalf("state %v, want fired at %d (the new timer), not at the old one", st, due)
	}
}

// "A `Set` for a `fired` reminder schedules it again (`fired_at_ns`
// dropped)."
func TestDocReminderSetAfterFiredSchedulesAgain(t *testing.T) {
	d := newDocWorld(t, "reminders")
	d.send(reminderEv, `{"reminder_id":"r1","text":"tea","delay_ms":0}`)
	d.fire(d.pending(timerFX, "r1"))
	seq := d.send(reminderEv, `{"reminder_id":"r1","text":"more tea","delay_ms":5000}`)
	due := d.stampOf(seq).LogicalNs + 5000*1_000_000
	st := d.cell(reminderWF, "r1")
	if _, has := st["fired_at_ns"]; has || st["status"] != "scheduled" || st["text"] != "more tea" || uint64(st["due_ns"].(float64)) != due {
		t.Fatalf("state %v, want scheduled again for %d without fired_at_ns", st, due)
	}
	d.fire(d.pending(timerFX, "r1"))
	if st := d.cell(reminderWF, "r1"); st["status"] != "fired" {
		t.Fatalf("state %v, want fired", st)
	}
}

// "`Receipt` for the timer (status ok ...)": an error receipt changes
// nothing.
func TestDocReminderErrorReceiptIgnored(t *testing.T) {
	d := newDocWorld(t, "reminders")
	d.send(reminderEv, `{"reminder_id":"r1","text":"tea","delay_ms":0}`)
	d.receipt(d.pending(timerFX, "r1"), receipts.StatusError, map[string]any{})
	if st := d.cell(reminderWF, "r1"); st["status"] != "scheduled" {
		t.Fatalf("state %v, want still scheduled", st)
	}
}

// "`Cancelled` (an operator cancelled the reminder's timer, `aosd cancel`):
// a `scheduled` reminder => `status:"cancelled"`, `cancelled_by`,
// `cancel_reason`; the timer never fires (its receipt is refused); a `Set`
// schedules it again."
func TestDocReminderCancelled(t *testing.T) {
	d := newDocWorld(t, "reminders")
	d.send(reminderEv, `{"reminder_id":"r1","text":"tea","delay_ms":60000}`)
	timer := d.pending(timerFX, "r1")
	res, err := d.w.CancelIntent(context.Background(), kernel.CancelRequest{Intent: timer.Hash, Reason: "no more tea", By: "ana"})
	if err != nil || !res.Delivered || res.Status != kernel.StatusCompleted {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	st := d.cell(reminderWF, "r1")
	if st["status"] != "cancelled" || st["cancelled_by"] != "ana" || st["cancel_reason"] != "no more tea" {
		t.Fatalf("state %v, want cancelled by ana for no more tea", st)
	}
	d.wantQuiescent()
	p := timerParams(t, timer.Params)
	sr := receipts.Sign(executorKey, receipts.Receipt{World: timer.World, Intent: timer.Hash, Effect: timer.Effect, Executor: receipts.BuiltinExecutor,
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"delivered_at_ns": p.DeliverAtNs, "key": p.Key}), Attempt: 1})
	if _, err := d.w.SubmitReceipt(context.Background(), sr); !errors.Is(err, kernel.ErrIntentCancelled) {
		t.Fatalf("the cancelled timer's receipt: %v, want refused as cancelled", err)
	}
	if st := d.cell(reminderWF, "r1"); st["status"] != "cancelled" {
		t.Fatalf("state %v after the refused receipt", st)
	}
	d.send(reminderEv, `{"reminder_id":"r1","text":"tea after all","delay_ms":0}`)
	st = d.cell(reminderWF, "r1")
	if _, has := st["cancelled_by"]; has || st["status"] != "scheduled" {
		t.Fatalf("state %v, want scheduled again without the cancel's fields", st)
	}
	d.fire(d.pending(timerFX, "r1"))
	if st := d.cell(reminderWF, "r1"); st["status"] != "fired" {
		t.Fatalf("state %v, want fired", st)
	}
}

// ---- choreography ----

const (
	choreoOrders   = "com.example/choreo.orders.step@1"
	choreoShipping = "com.example/choreo.shipping.step@1"
	choreoAudit    = "com.example/choreo.audit.step@1"
	placed         = "com.example/OrderPlaced@1"
)

// choreography "Expected: sending OrderPlaced for `o1` (100) and `o2` (250)
// leaves orders cells `o1`,`o2` paid, shipping cells `o1`,`o2` shipped, and
// audit `{"paid":2,"shipped":2,"paid_cents":350}`", with shipment_id
// "ship-" + order_id.
func TestDocChoreographyExpected(t *testing.T) {
	d := newDocWorld(t, "choreography")
	d.send(placed, `{"order_id":"o1","amount_cents":100}`)
	d.send(placed, `{"order_id":"o2","amount_cents":250}`)
	d.wantCell(choreoOrders, "o1", `{"amount_cents":100,"status":"paid"}`)
	d.wantCell(choreoOrders, "o2", `{"amount_cents":250,"status":"paid"}`)
	d.wantCell(choreoShipping, "o1", `{"shipment_id":"ship-o1","status":"shipped"}`)
	d.wantCell(choreoShipping, "o2", `{"shipment_id":"ship-o2","status":"shipped"}`)
	d.wantCell(choreoAudit, "", `{"paid":2,"shipped":2,"paid_cents":350}`)
}

// The emitted events: OrderPaid `{order_id, amount_cents}` and Shipped
// `{order_id, shipment_id}`; "`OrderPaid@1` fans out first to shipping,
// then to audit"; "A repeated OrderPlaced for an existing order emits
// nothing."
func TestDocChoreographyEmitsAndFansOutInOrder(t *testing.T) {
	d := newDocWorld(t, "choreography")
	d.send(placed, `{"order_id":"o1","amount_cents":100}`)
	emitted := func() []*records.EventRec {
		var out []*records.EventRec
		for _, v := range d.journal(journal.KindEvent) {
			if e := v.(*records.EventRec); e.Origin != nil {
				out = append(out, e)
			}
		}
		return out
	}
	evs := emitted()
	if len(evs) != 2 || evs[0].Schema != "com.example/OrderPaid@1" || evs[1].Schema != "com.example/Shipped@1" {
		t.Fatalf("emitted %d events, want OrderPaid then Shipped", len(evs))
	}
	if got, want := jsonValue(t, evs[0].Value), map[string]any{"order_id": "o1", "amount_cents": 100.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("OrderPaid %v, want %v", got, want)
	}
	if got, want := jsonValue(t, evs[1].Value), map[string]any{"order_id": "o1", "shipment_id": "ship-o1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Shipped %v, want %v", got, want)
	}
	var targets []string
	for _, tg := range evs[0].Targets {
		targets = append(targets, tg.Workflow)
	}
	if want := []string{choreoShipping, choreoAudit}; !slices.Equal(targets, want) {
		t.Errorf("OrderPaid delivered to %v, want %v", targets, want)
	}
	d.send(placed, `{"order_id":"o1","amount_cents":100}`)
	if n := len(emitted()); n != 2 {
		t.Fatalf("a repeated OrderPlaced emitted %d more events", n-2)
	}
	d.wantCell(choreoAudit, "", `{"paid":1,"shipped":1,"paid_cents":100}`)
}

// jsonValue is canonical CBOR b as the JSON value a user sees.
func jsonValue(t *testing.T, b []byte) map[string]any {
	t.Helper()
	js, err := schemas.ToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Each section's first line: "Workflow W, module M, keyed by K;
// effects_emitted: ...", the entrypoint ("step", except choreography's
// three), the event and state schemas, and "All workflows here declare
// `context: sys/WorkflowContext@1` except `choreo.audit`."
func TestDocWorkflowDeclarations(t *testing.T) {
	type decl struct {
		manifest, module, entry, key, event, state, context string
		effects                                             []string
	}
	const ctx = "sys/WorkflowContext@1"
	want := map[string]decl{
		counterWF: {"counter", "com.example/counter@1", "step", "com.example/CounterKey@1",
			"com.example/CountEvent@1", "com.example/CounterState@1", ctx, nil},
		orderWF: {"orders", "com.example/orders@1", "step", "com.example/OrderId@1",
			"com.example/OrderEvent@1", "com.example/OrderState@1", ctx, []string{chargeFX, timerFX}},
		noteWF: {"notes", "com.example/notes@1", "step", "com.example/NoteId@1",
			noteEv, "com.example/NoteState@1", ctx, nil},
		reminderWF: {"reminders", "com.example/reminders@1", "step", "com.example/ReminderId@1",
			"com.example/ReminderEvent@1", "com.example/ReminderState@1", ctx, []string{timerFX}},
		choreoOrders: {"choreography", "com.example/choreography@1", "orders", "com.example/OrderId@1",
			placed, "com.example/ChoreoOrderState@1", ctx, nil},
		choreoShipping: {"choreography", "com.example/choreography@1", "shipping", "com.example/OrderId@1",
			"com.example/OrderPaid@1", "com.example/ShippingState@1", ctx, nil},
		choreoAudit: {"choreography", "com.example/choreography@1", "audit", "",
			"com.example/AuditEvent@1", "com.example/AuditState@1", "", nil},
	}
	seen := 0
	for _, name := range []string{"counter", "orders", "notes", "reminders", "choreography"} {
		m, err := manifest.Load(built.Path(t, name))
		if err != nil {
			t.Fatal(err)
		}
		for wf, def := range m.Workflows {
			w, ok := want[wf]
			if !ok || w.manifest != name {
				t.Errorf("%s declares workflow %s, which EXAMPLES.md does not list there", name, wf)
				continue
			}
			seen++
			got := decl{name, def.Impl.Module, def.Impl.Entrypoint, def.KeySchema, def.Event, def.State, def.Context, def.EffectsEmitted}
			if len(got.effects) == 0 {
				got.effects = nil
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("%s:\n got %+v\nwant %+v", wf, got, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d workflows EXAMPLES.md lists", seen, len(want))
	}
}

// TestDocOrdersV2Walkthrough pins EXAMPLES.md "orders v2": orders waiting
// under v1 block a plain apply of v2; with --pin they stay on v1 and a new
// order starts on v2 (refund_due false); an upgrade's dry run would move
// both, migrating their state, and journals nothing; the upgrade moves
// them with their intents; a cancelled expiry timer leaves o2 waiting, a
// cancelled charge cancels it; v1 then retires. A late charge for an
// expired order marks the refund due (v2's changed step).
func TestDocOrdersV2Walkthrough(t *testing.T) {
	ctx := context.Background()
	const wf = "com.example/order.step@1"
	d := newDocWorld(t, "orders")
	d.send("com.example/OrderCreated@1", `{"order_id":"o1","amount_cents":500,"customer":"ada"}`)
	d.send("com.example/OrderCreated@1", `{"order_id":"o2","amount_cents":700,"customer":"bob"}`)
	m2, err := manifest.Load(built.Path(t, "orders-v2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.w.Apply(ctx, m2, false); !errors.Is(err, kernel.ErrNotQuiescent) {
		t.Fatalf("plain apply of v2 while orders wait: %v", err)
	}
	res, err := d.w.ApplyWith(ctx, m2, kernel.ApplyOptions{Pin: true})
	if err != nil || res.PinnedNow != 2 {
		t.Fatalf("apply --pin: %+v, %v", res, err)
	}
	d.send("com.example/OrderCreated@1", `{"order_id":"o3","amount_cents":900,"customer":"cy"}`)
	d.wantCell(wf, "o3", `{"order_id":"o3","amount_cents":900,"customer":"cy","status":"awaiting_payment","refund_due":false}`)

	height := d.w.Journal().Height()
	dry, err := d.w.Upgrade(ctx, kernel.UpgradeRequest{Workflow: wf, All: true, DryRun: true})
	if err != nil || len(dry.Cells) != 2 || d.w.Journal().Height() != height {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	for _, c := range dry.Cells {
		if c.Outcome != kernel.UpgradeWouldMove || c.Migrated == nil || c.StateHash == nil || *c.Migrated == *c.StateHash {
			t.Fatalf("dry run cell %s: %+v (%+v)", c.Key, c, c.Divergence)
		}
	}
	timer := d.pending("sys/timer.set@1", "o2")
	up, err := d.w.Upgrade(ctx, kernel.UpgradeRequest{Workflow: wf, All: true})
	if err != nil || up.Cells[0].Outcome != kernel.UpgradeMoved || up.Cells[1].Outcome != kernel.UpgradeMoved {
		t.Fatalf("upgrade: %+v, %v", up, err)
	}
	d.wantCell(wf, "o2", `{"order_id":"o2","amount_cents":700,"customer":"bob","status":"awaiting_payment","refund_due":false}`)
	if again := d.pending("sys/timer.set@1", "o2"); again.Hash != timer.Hash {
		t.Fatalf("o2's timer after the move: %s, before %s", again.Hash, timer.Hash)
	}

	if _, err := d.w.CancelIntent(ctx, kernel.CancelRequest{Intent: timer.Hash, Reason: "customer asked to hold the order", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	d.wantCell(wf, "o2", `{"order_id":"o2","amount_cents":700,"customer":"bob","status":"awaiting_payment","refund_due":false}`)
	if _, err := d.w.CancelIntent(ctx, kernel.CancelRequest{Intent: d.pending("com.example/payment.charge@1", "o2").Hash, Reason: "fraud review", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	d.wantCell(wf, "o2", `{"order_id":"o2","amount_cents":700,"customer":"bob","status":"cancelled","refund_due":false}`)

	// o1 expires, then its charge succeeds late: v2 marks the refund due.
	d.fire(d.pending("sys/timer.set@1", "o1"))
	d.charge("o1", receipts.StatusOK, "ch_1", "succeeded")
	d.wantCell(wf, "o1", `{"order_id":"o1","amount_cents":500,"customer":"ada","status":"expired","charge_id":"ch_1","refund_due":true}`)

	if _, err := d.w.Retire(ctx, *res.Previous); err != nil {
		t.Fatalf("retire v1: %v", err)
	}
}
