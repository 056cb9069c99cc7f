package journal

// Kind says what a journal record holds. Bodies are canonical CBOR; package
// records defines them.
type Kind string

// Record kinds.
const (
	KindEvent      Kind = "event"      // a domain event with its ingress stamp and targets
	KindStep       Kind = "step"       // one workflow step
	KindIntent     Kind = "intent"     // an effect intent opened
	KindReceipt    Kind = "receipt"    // a receipt admitted and delivered
	KindDrop       Kind = "drop"       // a receipt refused or fenced
	KindFrame      Kind = "frame"      // an effect stream frame
	KindManifest   Kind = "manifest"   // a manifest applied
	KindCheckpoint Kind = "checkpoint" // a snapshot's point: the state after it is captured, wasm modules start fresh
	KindSnapshot   Kind = "snapshot"   // the snapshot of a checkpoint is stored
	KindFault      Kind = "fault"      // an instance failed
	KindConfig     Kind = "config"     // the world's limits changed
	KindRecover    Kind = "recover"    // an operator recovered a failed instance
	KindWorld      Kind = "world"      // the world's identity, journaled once: at creation, or at the first open of a world made before identities
	KindModule     Kind = "module"     // a module set aside (its steps kept timing out) or resumed
	KindRetire     Kind = "retire"     // a drained live manifest retired (apply --pin keeps older ones live)
	KindCancel     Kind = "cancel"     // an operator cancelled an intent in flight
	KindMove       Kind = "move"       // a waiting cell moved to the current manifest after a replay check (aosd upgrade)
)

// Kinds lists every record kind, in the order above: readers that filter by
// kind accept exactly these.
func Kinds() []Kind {
	return []Kind{KindEvent, KindStep, KindIntent, KindReceipt, KindDrop, KindFrame, KindManifest,
		KindCheckpoint, KindSnapshot, KindFault, KindConfig, KindRecover, KindWorld, KindModule, KindRetire, KindCancel, KindMove}
}

// Record is one journal entry. Seq is gap-free and strictly increasing from 1.
type Record struct {
	Seq  uint64 `cbor:"seq" json:"seq"`
	Kind Kind   `cbor:"kind" json:"kind"`
	Body []byte `cbor:"body" json:"-"` // canonical CBOR
}

// Indexed reports whether records of kind k are indexed by kind: every
// backend keeps, for these landmarks, the seqs of their records, so that a
// reader finds the latest snapshot, or every manifest, without reading the
// journal (Marks). They are rare: one per apply or snapshot.
func Indexed(k Kind) bool {
	switch k {
	case KindManifest, KindCheckpoint, KindSnapshot:
		return true
	}
	return false
}

// IndexedKinds lists the kinds Indexed reports, in Kinds order.
func IndexedKinds() []Kind { return []Kind{KindManifest, KindCheckpoint, KindSnapshot} }
