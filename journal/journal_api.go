package journal

// Kind says what a journal record holds. Bodies are canonical CBOR defined by the kernel.
type Kind string

// Record kinds.
const (
	KindEvent    Kind = "event"    // a domain event with its ingress stamp and targets
	KindStep     Kind = "step"     // one workflow step
	KindIntent   Kind = "intent"   // an effect intent opened
	KindReceipt  Kind = "receipt"  // a receipt admitted and delivered
	KindDrop     Kind = "drop"     // a receipt refused or fenced
	KindFrame    Kind = "frame"    // an effect stream frame
	KindManifest Kind = "manifest" // a manifest applied
	KindSnapshot Kind = "snapshot" // a snapshot taken
	KindFault    Kind = "fault"    // an instance failed
)

// Record is one journal entry. Seq is gap-free and strictly increasing from 1.
type Record struct {
	Seq  uint64 `cbor:"seq" json:"seq"`
	Kind Kind   `cbor:"kind" json:"kind"`
	Body []byte `cbor:"body" json:"-"` // canonical CBOR
}

// API pinned for the kernel; implemented by the journal work.
//
//   func Open(db *badger.DB) (*Journal, error)    // keys under prefix "j/"; recovers Height
//   func (j *Journal) Height() uint64              // last durable seq (0 when empty)
//   func (j *Journal) Append(recs []Record) error  // one Badger txn + one fsync; recs[0].Seq == Height()+1, gap-free
//   func (j *Journal) Read(from uint64, fn func(Record) (bool, error)) error  // seq >= from, in order, until fn returns false
//   func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) // block until Height() > after
