package sys

// Names of the built-in schemas and effects whose shapes this package holds.
const (
	SchemaContext         = "sys/WorkflowContext@1"
	SchemaReceiptEnvelope = "sys/EffectReceiptEnvelope@1"
	SchemaReceiptRejected = "sys/EffectReceiptRejected@1"
	SchemaEffectCancelled = "sys/EffectCancelled@1"
	SchemaStreamFrame     = "sys/EffectStreamFrame@1"
	SchemaTimerSetParams  = "sys/TimerSetParams@1"
	SchemaTimerSetReceipt = "sys/TimerSetReceipt@1"
	SchemaBlobPutReceipt  = "sys/BlobPutReceipt@1"

	EffectTimerSet = "sys/timer.set@1"
	EffectBlobPut  = "sys/blob.put@1"
)

// Receipt statuses (ReceiptEnvelope.Status).
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// Context is sys/WorkflowContext@1: everything a step may know about the
// world beyond its state and event. The kernel stamps and journals it, so
// replay sees the same values.
type Context struct {
	NowNs         uint64 `cbor:"now_ns"`         // wall-clock time stamped at ingress (ns since the Unix epoch)
	LogicalNowNs  uint64 `cbor:"logical_now_ns"` // the world's logical time; timers are due in it
	Entropy       []byte `cbor:"entropy"`        // at least 32 bytes of journaled randomness for this step
	JournalHeight uint64 `cbor:"journal_height"`
	EventHash     string `cbor:"event_hash"` // "sha256:<hex>" of the delivered event
	ManifestHash  string `cbor:"manifest_hash"`
	Workflow      string `cbor:"workflow"` // the workflow def's name
	WorkflowHash  string `cbor:"workflow_hash"`
	Key           []byte `cbor:"key,omitempty"` // canonical CBOR of the cell key; nil when unkeyed
	CellMode      bool   `cbor:"cell_mode"`     // the workflow is keyed
}

// ReceiptEnvelope is sys/EffectReceiptEnvelope@1: the kernel's delivery of
// an executor's signed receipt to the cell that emitted the intent.
type ReceiptEnvelope struct {
	OriginWorkflow     string `cbor:"origin_workflow"`
	OriginWorkflowHash string `cbor:"origin_workflow_hash"`
	OriginKey          []byte `cbor:"origin_key,omitempty"` // canonical CBOR of the cell key; absent when unkeyed
	IntentHash         string `cbor:"intent_hash"`
	Effect             string `cbor:"effect"`
	Executor           string `cbor:"executor"`
	IssuerRef          string `cbor:"issuer_ref,omitempty"` // as given when the effect was emitted
	Payload            []byte `cbor:"payload"`              // canonical CBOR of the effect's receipt schema
	Status             string `cbor:"status"`               // StatusOK, StatusError or StatusTimeout
	EmittedAtSeq       uint64 `cbor:"emitted_at_seq"`
	Signature          []byte `cbor:"signature"`
}

// ReceiptRejected is sys/EffectReceiptRejected@1: a receipt for the cell's
// intent came back but its payload failed validation. The intent is
// settled; nothing more will come for it. The kernel delivers it only to a
// workflow whose event schema accepts it (as a variant arm).
type ReceiptRejected struct {
	OriginWorkflow string `cbor:"origin_workflow"`
	OriginKey      []byte `cbor:"origin_key,omitempty"`
	IntentHash     string `cbor:"intent_hash"`
	Effect         string `cbor:"effect"`
	Error          string `cbor:"error"`
	EmittedAtSeq   uint64 `cbor:"emitted_at_seq"`
}

// EffectCancelled is sys/EffectCancelled@1: an operator cancelled the
// cell's intent (`aosd cancel`). The intent is settled; no receipt will
// come for it, and the executor's work on it was withdrawn. The kernel
// delivers it only to a workflow whose event schema accepts it (as a
// variant arm, or as the event itself); any other workflow's instance
// fails, as for a rejected receipt it cannot take.
type EffectCancelled struct {
	OriginWorkflow string `cbor:"origin_workflow"`
	OriginKey      []byte `cbor:"origin_key,omitempty"` // canonical CBOR of the cell key; absent when unkeyed
	IntentHash     string `cbor:"intent_hash"`
	Effect         string `cbor:"effect"`
	IssuerRef      string `cbor:"issuer_ref,omitempty"` // as given when the effect was emitted
	EmittedAtSeq   uint64 `cbor:"emitted_at_seq"`
	CancelSeq      uint64 `cbor:"cancel_seq"` // the cancel record's journal seq
	Reason         string `cbor:"reason"`     // the operator's reason ("" when none was given)
	By             string `cbor:"by"`         // who asked, as the request said
}

// StreamFrame is sys/EffectStreamFrame@1: an executor's progress on an
// intent, non-authoritative, delivered to a workflow whose event schema
// accepts it. Seq rises by one per intent.
type StreamFrame struct {
	IntentHash string `cbor:"intent_hash"`
	Seq        uint64 `cbor:"seq"`
	Executor   string `cbor:"executor"`
	Payload    []byte `cbor:"payload"`
}

// TimerSetParams is sys/TimerSetParams@1, the params of sys/timer.set@1.
type TimerSetParams struct {
	DeliverAtNs uint64 `cbor:"deliver_at_ns"` // logical time, as Context.LogicalNowNs
	Key         string `cbor:"key,omitempty"`
}

// TimerSetReceipt is sys/TimerSetReceipt@1, the payload of a
// sys/timer.set@1 receipt.
type TimerSetReceipt struct {
	DeliveredAtNs uint64 `cbor:"delivered_at_ns"`
	Key           string `cbor:"key,omitempty"`
}

// BlobPutReceipt is sys/BlobPutReceipt@1, the payload of a sys/blob.put@1
// receipt: the CAS hash of the stored bytes ("sha256:<hex>") and their
// size.
type BlobPutReceipt struct {
	BlobRef string `cbor:"blob_ref"`
	Size    uint64 `cbor:"size"`
}
