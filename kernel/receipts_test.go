package kernel_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

const orderManifest = `[
 {"$kind":"defschema","name":"com.test/OrderCreated@1","schema":{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"integer"}},"required":["order_id","amount"]}},
 {"$kind":"defschema","name":"com.test/OrderEvent@1","variant":{"Created":"com.test/OrderCreated@1","Receipt":"sys/EffectReceiptEnvelope@1","Rejected":"sys/EffectReceiptRejected@1"}},
 {"$kind":"defschema","name":"com.test/OrderState@1","schema":{"type":"object","properties":{"pc":{"type":"string"},"order_id":{"type":"string"},"receipts":{"type":"integer"}},"required":["pc"]}},
 {"$kind":"defschema","name":"com.test/OrderId@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/ChargeParams@1","schema":{"type":"object","properties":{"amount":{"type":"integer"}},"required":["amount"]}},
 {"$kind":"defschema","name":"com.test/ChargeReceipt@1","schema":{"type":"object","properties":{"charge_id":{"type":"string"}},"required":["charge_id"]}},
 {"$kind":"defmodule","name":"com.test/order_mod@1","runtime":{"kind":"builtin","builtin":"test/order","identity":"test/order@1"}},
 {"$kind":"defeffect","name":"com.test/payment.charge@1","params":"com.test/ChargeParams@1","receipt":"com.test/ChargeReceipt@1"},
 {"$kind":"defworkflow","name":"com.test/order@1","state":"com.test/OrderState@1","event":"com.test/OrderEvent@1","key_schema":"com.test/OrderId@1","effects_emitted":["com.test/payment.charge@1"],"impl":{"module":"com.test/order_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/orders","routing":{"subscriptions":[{"event":"com.test/OrderCreated@1","workflow":"com.test/order@1","key_field":"order_id"}]}}
]`

// orderStep charges on Created and moves to done or failed on the receipt;
// it fails the step if a receipt names another cell.
func orderStep(in *modules.Input) (*modules.Output, error) {
	ev := decodeMap(nil, in.Event.Value)
	val := ev["$value"].(map[string]any)
	st := map[string]any{"pc": "idle"}
	if in.State != nil {
		st = decodeMap(nil, in.State)
	}
	switch ev["$tag"] {
	case "Created":
		st["pc"], st["order_id"], st["receipts"] = "awaiting", val["order_id"], uint64(0)
		return &modules.Output{State: schemas.MustMarshal(st), Effects: []modules.EffectOut{{
			Effect: "com.test/payment.charge@1", Params: schemas.MustMarshal(map[string]any{"amount": val["amount"]})}}}, nil
	case "Receipt":
		if string(val["origin_key"].([]byte)) != string(in.Event.Key) {
			return nil, fmt.Errorf("receipt for cell %x delivered to %x", val["origin_key"], in.Event.Key)
		}
		st["receipts"] = uint64(toInt(st["receipts"]) + 1)
		if val["status"] == "ok" {
			st["pc"] = "done"
		} else {
			st["pc"] = "failed"
		}
	case "Rejected":
		st["receipts"] = uint64(toInt(st["receipts"]) + 1)
		st["pc"] = "rejected"
	}
	return &modules.Output{State: schemas.MustMarshal(st)}, nil
}

// capture is a kernel.Publisher that records what it was given.
type capture struct {
	mu      sync.Mutex
	opened  []kernel.OpenIntent
	settled []schemas.Hash
}

func (c *capture) Publish(o []kernel.OpenIntent, s []schemas.Hash) {
	c.mu.Lock()
	c.opened = append(c.opened, o...)
	c.settled = append(c.settled, s...)
	c.mu.Unlock()
}

func (c *capture) intents() []kernel.OpenIntent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]kernel.OpenIntent(nil), c.opened...)
}

var executorKey = ed25519.NewKeyFromSeed(make([]byte, 32))

// paymentEffects are what executorKey ("payments") may settle.
var paymentEffects = []string{"com.test/payment.charge@1"}

func newOrderHarness(t testing.TB, onDisk bool) (*harness, *capture) {
	h, pub := newOrderWorld(t, onDisk)
	mustApply(t, h, orderManifest)
	return h, pub
}

// newOrderWorld is newOrderHarness before its manifest goes in.
func newOrderWorld(t testing.TB, onDisk bool) (*harness, *capture) {
	pub := &capture{}
	h := newHarnessWith(t, 3, onDisk, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		h.extra = func(c *kernel.Config) { c.Publisher = pub; c.Keyring = paymentsKeyring(t) }
	})
	return h, pub
}

func paymentsKeyring(t testing.TB) *receipts.Keyring {
	kr := receipts.NewKeyring()
	if err := kr.Add("payments", executorKey.Public().(ed25519.PublicKey), paymentEffects); err != nil {
		t.Fatal(err)
	}
	return kr
}

func createOrder(t testing.TB, h *harness, id string) {
	t.Helper()
	if _, err := h.w.Submit(context.Background(), kernel.Event{Schema: "com.test/OrderCreated@1",
		JSON: []byte(fmt.Sprintf(`{"order_id":%q,"amount":100}`, id))}); err != nil {
		t.Fatal(err)
	}
}

func chargeReceipt(it kernel.OpenIntent, status receipts.Status, payload any) receipts.SignedReceipt {
	return receipts.Sign(executorKey, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: it.Effect, Executor: "payments",
		Status: status, Payload: schemas.MustMarshal(payload), Attempt: 1})
}

func orderState(t testing.TB, h *harness, id string) map[string]any {
	t.Helper()
	v, err := h.w.Cell(context.Background(), "com.test/order@1", schemas.MustMarshal(id))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := schemas.UnmarshalTrusted(v.State, &m); err != nil {
		t.Fatal(err)
	}
	m["status"] = v.Status
	return m
}

func TestOrderReceipts(t *testing.T) {
	h, pub := newOrderHarness(t, false)
	createOrder(t, h, "o-ok")
	createOrder(t, h, "o-err")
	its := pub.intents()
	if len(its) != 2 {
		t.Fatalf("published %d intents, want 2", len(its))
	}
	if got := orderState(t, h, "o-ok"); got["pc"] != "awaiting" || got["status"] != kernel.StatusWaiting {
		t.Fatalf("before receipt: %v", got)
	}
	if _, err := h.w.SubmitReceipt(context.Background(), chargeReceipt(its[0], receipts.StatusOK, map[string]any{"charge_id": "ch_1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.SubmitReceipt(context.Background(), chargeReceipt(its[1], receipts.StatusError, map[string]any{"error": "card declined"})); err != nil {
		t.Fatal(err)
	}
	if got := orderState(t, h, "o-ok"); got["pc"] != "done" || got["status"] != kernel.StatusCompleted {
		t.Fatalf("after ok receipt: %v", got)
	}
	if got := orderState(t, h, "o-err"); got["pc"] != "failed" {
		t.Fatalf("after error receipt: %v", got)
	}
	s, _ := h.w.Status(context.Background())
	if !s.Quiescent || s.Inflight != 0 {
		t.Fatalf("status after receipts: %+v", s)
	}
	h.reopen() // replay reproduces receipts byte for byte
	if got := orderState(t, h, "o-ok"); got["pc"] != "done" {
		t.Fatalf("after reopen: %v", got)
	}
}

func TestAdversarialReceipts(t *testing.T) {
	ctx := context.Background()
	h, pub := newOrderHarness(t, false)
	createOrder(t, h, "o1")
	it := pub.intents()[0]
	height := func() uint64 { return h.w.Journal().Height() }

	good := chargeReceipt(it, receipts.StatusOK, map[string]any{"charge_id": "ch_1"})
	forged := good
	forged.Signature = append([]byte(nil), good.Signature...)
	forged.Signature[0] ^= 1
	tampered := good
	tampered.Payload = schemas.MustMarshal(map[string]any{"charge_id": "ch_2"})
	stranger := ed25519.NewKeyFromSeed([]byte("a stranger's 32-byte key seed!!!"))
	unknown := receipts.Sign(stranger, good.Receipt)

	for name, sr := range map[string]receipts.SignedReceipt{"forged signature": forged, "tampered payload": tampered, "unknown signer": unknown} {
		before := height()
		_, err := h.w.SubmitReceipt(ctx, sr)
		if !errors.Is(err, kernel.ErrUntrusted) {
			t.Fatalf("%s: err %v, want ErrUntrusted", name, err)
		}
		if height() != before {
			t.Fatalf("%s: journal grew from %d to %d", name, before, height())
		}
	}
	// Never-issued intent: validly signed, refused as unknown, journals nothing.
	ghost := it
	ghost.Hash = schemas.HashBytes([]byte("never issued"))
	before := height()
	res, err := h.w.SubmitReceipt(ctx, chargeReceipt(ghost, receipts.StatusOK, map[string]any{"charge_id": "x"}))
	if !errors.Is(err, kernel.ErrReceiptUnknown) || res.Dropped || height() != before {
		t.Fatalf("never-issued intent: %v %+v, journal %d -> %d", err, res, before, height())
	}
	// The real receipt, then a duplicate, refused and journaling nothing.
	res, err = h.w.SubmitReceipt(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	before = height()
	_, err = h.w.SubmitReceipt(ctx, good)
	if !errors.Is(err, kernel.ErrReceiptDuplicate) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", res.Seq)) || height() != before {
		t.Fatalf("duplicate: %v (want ErrReceiptDuplicate naming seq %d), journal %d -> %d", err, res.Seq, before, height())
	}
	if got := orderState(t, h, "o1"); got["receipts"] != uint64(1) || got["pc"] != "done" {
		t.Fatalf("after duplicate: %v (delivered twice?)", got)
	}
	if n := countKind(t, h.w, journal.KindDrop); n != 0 {
		t.Fatalf("%d drop records, want none", n)
	}
	// Malformed payload (fails the receipt schema): settles the intent and
	// delivers sys/EffectReceiptRejected@1, which this workflow accepts.
	createOrder(t, h, "o2")
	it2 := pub.intents()[1]
	res, err = h.w.SubmitReceipt(ctx, chargeReceipt(it2, receipts.StatusOK, map[string]any{"wrong": true}))
	if err != nil || res.Rejected == "" {
		t.Fatalf("malformed payload: %v %+v", err, res)
	}
	if got := orderState(t, h, "o2"); got["pc"] != "rejected" || got["status"] != kernel.StatusCompleted {
		t.Fatalf("after malformed payload: %v", got)
	}
	h.reopen()
	if got := orderState(t, h, "o2"); got["pc"] != "rejected" {
		t.Fatalf("after reopen: %v", got)
	}
	checkTracePrefilter(t, h, it, it2)
}

// checkTracePrefilter: Trace and TraceIntent skip records by their bytes
// before decoding; the timelines must equal those found by decoding every
// record, and hold what this world is known to have.
func checkTracePrefilter(t *testing.T, h *harness, it, it2 kernel.OpenIntent) {
	t.Helper()
	ctx := context.Background()
	kinds := func(es []records.TraceEntry) string {
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%d:%s ", e.Seq, e.Kind)
		}
		return b.String()
	}
	for _, id := range []string{"o1", "o2", "o3"} {
		key := schemas.MustMarshal(id)
		got, err := records.Trace(ctx, h.w.Journal(), it.OriginWorkflow, key)
		if err != nil {
			t.Fatal(err)
		}
		want, err := records.TraceUnfiltered(ctx, h.w.Journal(), it.OriginWorkflow, key)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Fatalf("trace %s with the prefilter: %s\nwithout: %s", id, kinds(got), kinds(want))
		}
		if id == "o1" && !strings.Contains(kinds(got), ":receipt") {
			t.Fatalf("o1's trace lacks its receipt: %s", kinds(got))
		}
	}
	for _, x := range []kernel.OpenIntent{it, it2} {
		got, err := records.TraceIntent(ctx, h.w.Journal(), x.Hash)
		if err != nil {
			t.Fatal(err)
		}
		want, err := records.TraceIntentUnfiltered(ctx, h.w.Journal(), x.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) || len(got) == 0 {
			t.Fatalf("trace --intent %s with the prefilter: %s\nwithout: %s", x.Hash, kinds(got), kinds(want))
		}
	}
}

// TestIdenticalParamsDistinctIntents: 1,000 cells emit identical params; each
// gets its own intent and every receipt, submitted concurrently in random
// order, lands only in its own cell.
func TestIdenticalParamsDistinctIntents(t *testing.T) {
	seed := testSeed(t)
	h, pub := newOrderHarness(t, false)
	const n = 1000
	evs := make([]kernel.Event, n)
	for i := range evs {
		evs[i] = kernel.Event{Schema: "com.test/OrderCreated@1", JSON: []byte(fmt.Sprintf(`{"order_id":"o%04d","amount":100}`, i))}
	}
	if _, err := h.w.Submit(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	its := pub.intents()
	seen := map[schemas.Hash]bool{}
	for _, it := range its {
		seen[it.Hash] = true
	}
	if len(its) != n || len(seen) != n {
		t.Fatalf("%d intents, %d distinct; want %d", len(its), len(seen), n)
	}
	rand.New(rand.NewPCG(seed, 9)).Shuffle(len(its), func(i, j int) { its[i], its[j] = its[j], its[i] })
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				if _, err := h.w.SubmitReceipt(context.Background(), chargeReceipt(its[i], receipts.StatusOK, map[string]any{"charge_id": "c"})); err != nil {
					t.Error(err)
				}
			}
		}(g)
	}
	wg.Wait()
	s, err := h.w.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Instances.Failed != 0 || s.Inflight != 0 || s.Instances.Completed != n {
		t.Fatalf("status %+v: a receipt reached the wrong cell or was lost", s)
	}
	for i := 0; i < n; i += 97 {
		if got := orderState(t, h, fmt.Sprintf("o%04d", i)); got["pc"] != "done" || got["receipts"] != uint64(1) {
			t.Fatalf("o%04d: %v", i, got)
		}
	}
}

// TestNoEffectBeforeDurable kills a real process between the step that opens
// an intent and the flush that records it: no executor saw the intent, and
// after restart it does not exist. A second round kills the process while a
// receipt is being flushed: after restart the intent is still pending, the
// same receipt is delivered once, and a third copy is refused as a duplicate.
func TestNoEffectBeforeDurable(t *testing.T) {
	if mode := os.Getenv("AOS_FLUSH_CHILD"); mode != "" {
		flushChild(mode)
		return
	}
	dir := t.TempDir()
	man := filepath.Join(dir, "m.json")
	if err := os.WriteFile(man, []byte(orderManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	world := filepath.Join(dir, "world")
	runChild := func(mode string) []string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoEffectBeforeDurable$")
		cmd.Env = append(os.Environ(), "AOS_FLUSH_CHILD="+mode, "AOS_FLUSH_WORLD="+world, "AOS_FLUSH_MANIFEST="+man)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child %s: want death by SIGKILL, got %v; output %q", mode, err, lines)
		}
		return lines
	}
	lines := runChild("intent")
	for _, l := range lines {
		if strings.HasPrefix(l, "PUBLISHED") {
			t.Fatalf("an executor saw an intent that was never durable: %s", l)
		}
	}
	if !contains(lines, "STEPPED") {
		t.Fatalf("child never reached the flush: %q", lines)
	}
	h := reopenAt(t, world)
	if n := countKind(t, h.w, journal.KindIntent); n != 0 {
		t.Fatalf("%d intents in the journal after the crash, want 0", n)
	}
	h.w.Close()
	h.db.Close()

	lines = runChild("receipt")
	var intent string
	for _, l := range lines {
		if strings.HasPrefix(l, "PUBLISHED ") {
			intent = strings.TrimPrefix(l, "PUBLISHED ")
		}
	}
	if intent == "" {
		t.Fatalf("child published no intent: %q", lines)
	}
	h = reopenAt(t, world)
	defer h.db.Close()
	defer h.w.Close()
	if n := countKind(t, h.w, journal.KindReceipt); n != 0 {
		t.Fatalf("receipt journaled although its flush was killed")
	}
	pending, err := h.w.PendingIntents(context.Background())
	if err != nil || len(pending) != 1 || pending[0].Hash.String() != intent {
		t.Fatalf("pending after crash: %v %v, want %s", pending, err, intent)
	}
	sr := chargeReceipt(pending[0], receipts.StatusOK, map[string]any{"charge_id": "ch"})
	if _, err := h.w.SubmitReceipt(context.Background(), sr); err != nil {
		t.Fatalf("resubmitted receipt: %v", err)
	}
	if _, err := h.w.SubmitReceipt(context.Background(), sr); !errors.Is(err, kernel.ErrReceiptDuplicate) {
		t.Fatalf("third copy: %v, want refused as a duplicate", err)
	}
	if n := countKind(t, h.w, journal.KindReceipt); n != 1 {
		t.Fatalf("%d receipts delivered, want exactly 1", n)
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func countKind(t testing.TB, w *kernel.World, k journal.Kind) int {
	n := 0
	for _, r := range allRecords(t, w) {
		if r.Kind == k {
			n++
		}
	}
	return n
}

func reopenAt(t testing.TB, world string) *harness {
	db, err := worldstore.Open(world)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, db: db, clock: &stepClock{now: 1 << 40}, entropy: newEntropy(5), builtins: testBuiltins()}
	h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
	kr := receipts.NewKeyring()
	_ = kr.Add("payments", executorKey.Public().(ed25519.PublicKey), paymentEffects)
	h.extra = func(c *kernel.Config) { c.Keyring = kr }
	h.open()
	return h
}

// flushChild: mode "intent" kills itself in the flush after the order step;
// mode "receipt" creates an order normally, then kills itself in the flush
// that would record the receipt.
func flushChild(mode string) {
	world, manPath := os.Getenv("AOS_FLUSH_WORLD"), os.Getenv("AOS_FLUSH_MANIFEST")
	b := testBuiltins()
	b.MustRegister("test/order", "test/order@1", "step", orderStep)
	kr := receipts.NewKeyring()
	_ = kr.Add("payments", executorKey.Public().(ed25519.PublicKey), paymentEffects)
	var armed sync.Mutex
	killNext := false
	pub := publisherFunc(func(o []kernel.OpenIntent, _ []schemas.Hash) {
		for _, it := range o {
			fmt.Printf("PUBLISHED %s\n", it.Hash)
		}
	})
	db, err := worldstore.Open(world)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	// The flush hook is a wrapper at the journal port: it runs in the
	// committer just before each append, after the step.
	jn := &storefault.Journal{Log: db.Journal(), BeforeAppend: func([]journal.Record) {
		armed.Lock()
		k := killNext
		armed.Unlock()
		if k {
			fmt.Println("STEPPED")
			os.Stdout.Sync()
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}}
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: jn}, kernel.Config{Builtins: b, Keyring: kr, Publisher: pub})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	m, err := manifest.Load(manPath)
	if err != nil {
		os.Exit(2)
	}
	if _, err := w.Apply(context.Background(), m, false); err != nil {
		os.Exit(2)
	}
	arm := func() { armed.Lock(); killNext = true; armed.Unlock() }
	create := func(id string) error {
		_, err := w.Submit(context.Background(), kernel.Event{Schema: "com.test/OrderCreated@1", JSON: []byte(`{"order_id":"` + id + `","amount":5}`)})
		return err
	}
	if mode == "intent" {
		arm()
		_ = create("crash-before-flush")
		os.Exit(3) // unreachable: the flush kills us
	}
	if err := create("crash-in-receipt"); err != nil {
		os.Exit(2)
	}
	pending, _ := w.PendingIntents(context.Background())
	arm()
	_, _ = w.SubmitReceipt(context.Background(), chargeReceipt(pending[0], receipts.StatusOK, map[string]any{"charge_id": "ch"}))
	os.Exit(3)
}

type publisherFunc func([]kernel.OpenIntent, []schemas.Hash)

func (f publisherFunc) Publish(o []kernel.OpenIntent, s []schemas.Hash) { f(o, s) }
