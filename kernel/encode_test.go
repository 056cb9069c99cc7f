package kernel

import (
	"testing"

	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas/randval"
)

// TestContextEncodersMatchMarshal: the hand-written encoders of the values
// handed to modules give exactly the bytes of the reflection-based
// canonical encoder on random values (records/encode_test.go does the same
// for the journal's records).
func TestContextEncodersMatchMarshal(t *testing.T) {
	g := randval.Seeded(t)
	num, bs, str := g.Num, g.Bytes, g.Str
	check := func(what string, got []byte, v any) { t.Helper(); randval.CheckMarshal(t, what, got, v) }
	for i := 0; i < 5000; i++ {
		c := sys.Context{NowNs: num(), LogicalNowNs: num(), Entropy: bs(), JournalHeight: num(), EventHash: str(),
			ManifestHash: str(), Workflow: str(), WorkflowHash: str(), Key: bs(), CellMode: g.R.IntN(2) == 0}
		check("context", encodeContext(&c), &c)
		env := sys.ReceiptEnvelope{OriginWorkflow: str(), OriginWorkflowHash: str(), OriginKey: bs(), IntentHash: str(), Effect: str(),
			Executor: str(), IssuerRef: str(), Payload: bs(), Status: str(), EmittedAtSeq: num(), Signature: bs()}
		check("envelope", encodeEnvelope(&env), &env)
	}
}
