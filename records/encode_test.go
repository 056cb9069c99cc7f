package records

import (
	"testing"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/schemas/randval"
)

// TestRecordEncodersMatchMarshal: the hand-written encoders give exactly the
// bytes of the reflection-based canonical encoder, on random records that
// cover every optional field absent, empty and present, nil versus empty
// slices, and integers at every CBOR head width.
func TestRecordEncodersMatchMarshal(t *testing.T) {
	g := randval.Seeded(t)
	r, num, bs, str, hash := g.R, g.Num, g.Bytes, g.Str, g.Hash
	check := func(what string, got []byte, v any) { t.Helper(); randval.CheckMarshal(t, what, got, v) }
	for i := 0; i < 5000; i++ {
		ev := EventRec{Schema: str(), Value: bs(), Stamp: Stamp{NowNs: num(), LogicalNs: num(), Entropy: bs(), Height: num(), ManifestHash: hash()}}
		switch r.IntN(3) {
		case 0:
		case 1:
			ev.Targets = []TargetRec{}
		default:
			for n := r.IntN(30); n > 0; n-- {
				ev.Targets = append(ev.Targets, TargetRec{Workflow: str(), Key: bs()})
			}
		}
		if r.IntN(2) == 0 {
			ev.Origin = &OriginRec{Workflow: str(), Key: bs(), Step: num(), Depth: num()}
		}
		if r.IntN(2) == 0 { // an ingress idempotency key, at every text head width
			k := make([]byte, 1+r.IntN([]int{23, 255, 300}[r.IntN(3)]))
			for i := range k {
				k[i] = byte('!' + r.IntN(94))
			}
			ev.IdempotencyKey = string(k)
		}
		check("event", EncodeEvent(&ev), &ev)
		if n, c := len(EncodeEvent(&ev)), cap(EncodeEvent(&ev)); n > eventSize(&ev) || c != eventSize(&ev) {
			t.Fatalf("event: %d bytes in a buffer of %d; eventSize says at most %d, allocated once", n, c, eventSize(&ev))
		}

		st := StepRec{Input: num(), Workflow: str(), WorkflowHash: hash(), Key: bs()}
		if r.IntN(2) == 0 {
			h := hash()
			st.StateHash = &h
		}
		for n := r.IntN(3) * r.IntN(40); n > 0; n-- {
			st.Emitted = append(st.Emitted, num())
		}
		if r.IntN(3) == 0 {
			st.Emitted = []uint64{}
		}
		for n := r.IntN(3) * r.IntN(5); n > 0; n-- {
			st.Intents = append(st.Intents, hash())
		}
		check("step", EncodeStep(&st), &st)

		id := IntentID{World: str(), OriginWorkflow: str(), OriginWorkflowHash: hash(), OriginKey: bs(), Effect: str(), EffectHash: hash(),
			Params: bs(), IdempotencyKey: bs(), IssuerRef: str(), EmittedAt: num(), Index: num()}
		check("intent id", EncodeIntentID(nil, &id), &id)
		rec := IntentRec{Hash: hash(), IntentID: id}
		check("intent", EncodeIntentID(&rec.Hash, &rec.IntentID), &rec)

		sr := receipts.SignedReceipt{Receipt: receipts.Receipt{World: str(), Intent: hash(), Effect: str(), Executor: str(),
			Status: receipts.Status(str()), Payload: bs(), Attempt: num(), IssuerRef: str()}, KeyID: str(), Signature: bs()}
		check("signed receipt", receipts.AppendSignedReceipt(nil, &sr), &sr)
		if n := len(receipts.AppendSignedReceipt(nil, &sr)); n > receipts.SignedReceiptSize(&sr) {
			t.Fatalf("signed receipt: %d bytes, SignedReceiptSize says at most %d", n, receipts.SignedReceiptSize(&sr))
		}
		rr := ReceiptRec{Receipt: sr, Stamp: Stamp{NowNs: num(), LogicalNs: num(), Entropy: bs(), Height: num(), ManifestHash: hash()}, Rejected: str()}
		check("receipt", EncodeReceipt(&rr), &rr)
	}
}

func BenchmarkRecordEncoders(b *testing.B) {
	h := schemas.HashBytes([]byte("x"))
	ev := EventRec{Schema: "com.test/CountEvent@1", Value: []byte{0xa2, 0x62, 'b', 'y', 1, 0x63, 'k', 'e', 'y', 0x61, 'a'},
		Stamp:   Stamp{NowNs: 1 << 60, LogicalNs: 1 << 60, Entropy: h[:], Height: 123456, ManifestHash: h},
		Targets: []TargetRec{{Workflow: "com.test/counter.step@1", Key: []byte{0x61, 'a'}}}}
	st := StepRec{Input: 123456, Workflow: "com.test/counter.step@1", WorkflowHash: h, Key: []byte{0x61, 'a'}, StateHash: &h}
	b.Run("reflection", func(b *testing.B) {
		for b.Loop() {
			schemas.MustMarshal(&ev)
			schemas.MustMarshal(&st)
		}
	})
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			EncodeEvent(&ev)
			EncodeStep(&st)
		}
	})
}
