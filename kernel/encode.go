package kernel

import (
	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/records"
)

// Hand-written canonical CBOR encoders for the two values the loop hands a
// module on every step and every receipt: the workflow context and the
// receipt envelope, whose shapes are package sys's (the sdk decodes them). They are not journaled (the journal's records are
// encoded in package records), but they are hashed and validated on the hot
// path, for the same reason. TestContextEncodersMatchMarshal holds them to
// schemas.Marshal on random values. Key order and null rules: see
// records/encode.go.

// encodeContext is schemas.MustMarshal(c). Key order: key?, now_ns,
// entropy, workflow, cell_mode, event_hash, manifest_hash, workflow_hash,
// journal_height, logical_now_ns.
func encodeContext(c *sys.Context) []byte {
	b := make([]byte, 0, 400+len(c.Key)+len(c.Workflow))
	b = canon.AppendHead(b, canon.MajorMap, records.MapSize(9, len(c.Key) > 0))
	if len(c.Key) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "key"), c.Key)
	}
	b = canon.AppendHead(canon.AppendText(b, "now_ns"), canon.MajorUint, c.NowNs)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "entropy"), c.Entropy)
	b = canon.AppendText(canon.AppendText(b, "workflow"), c.Workflow)
	b = canon.AppendBool(canon.AppendText(b, "cell_mode"), c.CellMode)
	b = canon.AppendText(canon.AppendText(b, "event_hash"), c.EventHash)
	b = canon.AppendText(canon.AppendText(b, "manifest_hash"), c.ManifestHash)
	b = canon.AppendText(canon.AppendText(b, "workflow_hash"), c.WorkflowHash)
	b = canon.AppendHead(canon.AppendText(b, "journal_height"), canon.MajorUint, c.JournalHeight)
	return canon.AppendHead(canon.AppendText(b, "logical_now_ns"), canon.MajorUint, c.LogicalNowNs)
}

// encodeEnvelope is schemas.MustMarshal(e). Key order: effect, status,
// payload, executor, signature, issuer_ref?, origin_key?, intent_hash,
// emitted_at_seq, origin_workflow, origin_workflow_hash.
func encodeEnvelope(e *sys.ReceiptEnvelope) []byte {
	b := make([]byte, 0, 200+len(e.Effect)+len(e.Status)+len(e.Payload)+len(e.Executor)+len(e.Signature)+
		len(e.IssuerRef)+len(e.OriginKey)+len(e.IntentHash)+len(e.OriginWorkflow)+len(e.OriginWorkflowHash))
	b = canon.AppendHead(b, canon.MajorMap, records.MapSize(9, e.IssuerRef != "", len(e.OriginKey) > 0))
	b = canon.AppendText(canon.AppendText(b, "effect"), e.Effect)
	b = canon.AppendText(canon.AppendText(b, "status"), e.Status)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "payload"), e.Payload)
	b = canon.AppendText(canon.AppendText(b, "executor"), e.Executor)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "signature"), e.Signature)
	if e.IssuerRef != "" {
		b = canon.AppendText(canon.AppendText(b, "issuer_ref"), e.IssuerRef)
	}
	if len(e.OriginKey) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "origin_key"), e.OriginKey)
	}
	b = canon.AppendText(canon.AppendText(b, "intent_hash"), e.IntentHash)
	b = canon.AppendHead(canon.AppendText(b, "emitted_at_seq"), canon.MajorUint, e.EmittedAtSeq)
	b = canon.AppendText(canon.AppendText(b, "origin_workflow"), e.OriginWorkflow)
	return canon.AppendText(canon.AppendText(b, "origin_workflow_hash"), e.OriginWorkflowHash)
}
