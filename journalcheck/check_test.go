package journalcheck

import (
	"context"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// synth writes a journal by hand, as the kernel would: a manifest, then
// inputs run to idle.
type synth struct {
	j       *journal.Memory
	logical uint64
	man     schemas.Hash
}

func newSynth(t testing.TB) *synth {
	s := &synth{j: journal.NewMemory(), man: schemas.HashBytes([]byte("manifest"))}
	s.add(t, journal.KindManifest, &records.ManifestRec{Hash: s.man, Name: "com.test/m", Source: []byte{0xa0}})
	return s
}

func (s *synth) next() uint64 { return s.j.Height() + 1 }

func (s *synth) stamp() records.Stamp {
	s.logical++
	return records.Stamp{NowNs: s.logical, LogicalNs: s.logical, Entropy: make([]byte, 32), Height: s.next() - 1, ManifestHash: s.man}
}

func (s *synth) add(t testing.TB, kind journal.Kind, v any) uint64 {
	t.Helper()
	seq := s.next()
	if err := s.j.Append([]journal.Record{{Seq: seq, Kind: kind, Body: schemas.MustMarshal(v)}}); err != nil {
		t.Fatal(err)
	}
	return seq
}

const wf = "com.test/w@1"

// order: an event for key, the step that opens one intent, its intent
// record; it returns the intent's hash.
func (s *synth) order(t testing.TB, key []byte) schemas.Hash {
	ev := s.add(t, journal.KindEvent, &records.EventRec{Schema: "com.test/E@1", Value: []byte{0xa0}, Stamp: s.stamp(),
		Targets: []records.TargetRec{{Workflow: wf, Key: key}}})
	step := s.next()
	id := records.IntentID{OriginWorkflow: wf, OriginKey: key, Effect: "com.test/pay@1", Params: []byte{0xa0}, EmittedAt: step}
	h := schemas.HashBytes(records.EncodeIntentID(nil, &id))
	s.add(t, journal.KindStep, &records.StepRec{Input: ev, Workflow: wf, Key: key, Intents: []schemas.Hash{h}})
	s.add(t, journal.KindIntent, &records.IntentRec{Hash: h, IntentID: id})
	return h
}

// pay settles intent h of key with a receipt and the step it wakes.
func (s *synth) pay(t testing.TB, key []byte, h schemas.Hash) {
	r := s.add(t, journal.KindReceipt, &records.ReceiptRec{Receipt: receipts.SignedReceipt{Receipt: receipts.Receipt{Intent: h, Effect: "com.test/pay@1",
		Executor: "x", Status: receipts.StatusOK, Payload: []byte{0xa0}}}, Stamp: s.stamp()})
	s.add(t, journal.KindStep, &records.StepRec{Input: r, Workflow: wf, Key: key})
}

// TestMemoryBounded: the check keeps what is live, not what was: after
// thousands of instances came and went, it holds no instance, no pending
// intent, and only the last RememberSettled settled intents.
func TestMemoryBounded(t *testing.T) {
	s := newSynth(t)
	const n = 5000
	for i := range n {
		key := schemas.MustMarshal(fmt.Sprintf("k%d", i))
		s.pay(t, key, s.order(t, key))
	}
	c := newChecker(Options{MaxViolations: DefaultMaxViolations, RememberSettled: 100})
	c.rep.From = 1
	if err := s.j.Read(1, func(r journal.Record) (bool, error) { c.record(r); return true, nil }); err != nil {
		t.Fatal(err)
	}
	c.end()
	if len(c.rep.Violations) != 0 || c.rep.Records != s.j.Height() {
		t.Fatalf("report %+v", c.rep)
	}
	if len(c.insts) != 0 || len(c.busy) != 0 || len(c.pending) != 0 || len(c.settled) != 100 || len(c.fifo)-c.head != 100 || len(c.fifo) > 2*1024+101 {
		t.Fatalf("after %d orders: %d instances, %d busy, %d pending, %d settled remembered, fifo %d (head %d)",
			n, len(c.insts), len(c.busy), len(c.pending), len(c.settled), len(c.fifo), c.head)
	}
	// What is forgotten is still a violation, worded as never opened.
	first := schemas.HashBytes(records.EncodeIntentID(nil, &records.IntentID{OriginWorkflow: wf, OriginKey: schemas.MustMarshal("k0"),
		Effect: "com.test/pay@1", Params: []byte{0xa0}, EmittedAt: 3}))
	s.pay(t, schemas.MustMarshal("k0"), first)
	rep, err := Check(context.Background(), s.j, Options{RememberSettled: 100})
	if err != nil || len(rep.Violations) != 2 || rep.Violations[0].Rule != RuleReceiptUnknownIntent || rep.Violations[1].Rule != RuleStepInput {
		t.Fatalf("a second receipt for a forgotten intent: %+v %v", rep, err)
	}
	rep, err = Check(context.Background(), s.j, Options{})
	if err != nil || len(rep.Violations) != 2 || rep.Violations[0].Rule != RuleReceiptTwice {
		t.Fatalf("a second receipt for a remembered intent: %+v %v", rep, err)
	}
}

// TestMaxViolations: at most MaxViolations are listed, the rest counted,
// and the report is not OK.
func TestMaxViolations(t *testing.T) {
	s := newSynth(t)
	for range 30 {
		s.add(t, journal.KindReceipt, &records.ReceiptRec{Receipt: receipts.SignedReceipt{Receipt: receipts.Receipt{Intent: schemas.HashBytes([]byte("x")),
			Effect: "e", Executor: "x", Status: receipts.StatusOK, Payload: []byte{0xa0}}}, Stamp: s.stamp()})
	}
	rep, err := Check(context.Background(), s.j, Options{MaxViolations: 10})
	if err != nil || len(rep.Violations) != 10 || rep.Omitted != 20 || rep.OK() || rep.Violations[0].Seq != 2 || rep.Violations[9].Seq != 11 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestEmptyAndUnknown: an empty journal is clean; a record of a kind no
// kernel writes is record-decode.
func TestEmptyAndUnknown(t *testing.T) {
	rep, err := Check(context.Background(), journal.NewMemory(), Options{})
	if err != nil || !rep.OK() || rep.Records != 0 || rep.To != 0 || rep.From != 1 {
		t.Fatalf("empty journal: %+v %v", rep, err)
	}
	s := newSynth(t)
	if err := s.j.Append([]journal.Record{{Seq: 2, Kind: "gossip", Body: []byte{0xa0}}}); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(context.Background(), s.j, Options{})
	if err != nil || len(rep.Violations) != 1 || rep.Violations[0].String() != `seq 2 record-decode: unknown record kind "gossip"` {
		t.Fatalf("unknown kind: %+v %v", rep, err)
	}
}

// TestCanceled: a check stops with the context.
func TestCanceled(t *testing.T) {
	s := newSynth(t)
	for i := range 3000 {
		key := schemas.MustMarshal(fmt.Sprintf("k%d", i))
		s.pay(t, key, s.order(t, key))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, s.j, Options{}); err == nil {
		t.Fatal("a canceled check finished")
	}
}

// BenchmarkCheck: records checked per second on orders that each open an
// intent, get its receipt and step on it (five records an order).
func BenchmarkCheck(b *testing.B) {
	s := newSynth(b)
	for i := range 20000 {
		key := schemas.MustMarshal(fmt.Sprintf("k%d", i))
		s.pay(b, key, s.order(b, key))
	}
	b.ResetTimer()
	for range b.N {
		rep, err := Check(context.Background(), s.j, Options{})
		if err != nil || !rep.OK() {
			b.Fatal(rep, err)
		}
	}
	b.ReportMetric(float64(s.j.Height())*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
