package receipts

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/aos-kernel/aos/schemas"
)

// The signature scheme is plain Ed25519 (RFC 8032): an executor signs with
// any standard library and its signatures verify here. The arithmetic is
// curve25519-voi's, not crypto/ed25519's, because it is about twice as fast
// for one signature, faster again against a public key expanded once when
// it is trusted, and offers batch verification (four signatures for the
// price of one in batches of 64), which the standard library does not.
// Signatures are deterministic, so both libraries sign identically
// (TestSignMatchesStandardLibrary).
//
// Verification uses voi's default rules: the cofactored equation (the only
// one batch verification can use, so one receipt is judged the same alone
// or in a batch), S and A canonical, R of small order allowed. Keys of
// small order or in non-canonical form are refused when they are trusted
// (checkPublicKey), so for every trusted key the rules accept what
// crypto/ed25519 accepts except signatures a key holder crafts with
// small-order components on purpose, which are worthless to anyone.

// ErrWeakKey is returned for a public key no honest signer has: not a curve
// point, of small order, or in non-canonical form.
var ErrWeakKey = errors.New("receipts: weak or invalid public key")

// checkPublicKey expands pub for repeated verification, refusing weak keys.
func checkPublicKey(pub ed25519.PublicKey) (*voi.ExpandedPublicKey, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrWeakKey, len(pub), ed25519.PublicKeySize)
	}
	var c curve.CompressedEdwardsY
	if _, err := c.SetBytes(pub); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWeakKey, err)
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(&c); err != nil {
		return nil, fmt.Errorf("%w: not a point on the curve", ErrWeakKey)
	}
	if !c.IsCanonicalVartime() {
		return nil, fmt.Errorf("%w: not in canonical form", ErrWeakKey)
	}
	if p.IsSmallOrder() {
		return nil, fmt.Errorf("%w: a point of small order", ErrWeakKey)
	}
	x, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWeakKey, err)
	}
	return x, nil
}

// signEd25519 is ed25519.Sign with voi's faster arithmetic.
func signEd25519(priv ed25519.PrivateKey, msg []byte) []byte {
	return voi.Sign(voi.PrivateKey(priv), msg)
}

// Verified is one receipt's verdict: the name of the executor whose trusted
// key signed it, or why it is refused.
type Verified struct {
	Executor string
	Err      error
}

// VerifyBatch is Verify for many receipts at once, with the signatures
// checked in one batch: the same verdicts as calling Verify on each (a batch
// that fails is re-checked one signature at a time to find the culprits),
// in about a quarter of the time when the batch is large and valid.
func (k *Keyring) VerifyBatch(srs []SignedReceipt) []Verified {
	out := make([]Verified, len(srs))
	keys := make([]Key, len(srs))
	var bv *voi.BatchVerifier
	idx := make([]int, 0, len(srs)) // out index of each batch entry
	for i := range srs {
		key, err := k.precheck(&srs[i])
		if err != nil {
			out[i].Err = err
			continue
		}
		if bv == nil {
			bv = voi.NewBatchVerifierWithCapacity(len(srs))
		}
		keys[i] = key
		bv.AddExpanded(key.expanded, SigningMessage(&srs[i].Receipt), srs[i].Signature)
		idx = append(idx, i)
	}
	if bv == nil {
		return out
	}
	_, valid := bv.Verify(nil)
	for j, i := range idx {
		if !valid[j] {
			out[i].Err = badSignature(&srs[i], keys[i])
			continue
		}
		out[i].Executor, out[i].Err = postcheck(&srs[i], keys[i])
	}
	return out
}

// precheck runs Verify's steps before the signature: shape, trusted key.
func (k *Keyring) precheck(sr *SignedReceipt) (Key, error) {
	if err := sr.checkFields(); err != nil {
		return Key{}, err
	}
	if err := sr.checkEnvelope(); err != nil {
		return Key{}, err
	}
	return k.lookup(sr.KeyID, sr.Intent)
}

// lookup finds the trusted key with id keyID, for a message about intent h.
func (k *Keyring) lookup(keyID string, h schemas.Hash) (Key, error) {
	k.mu.RLock()
	key, ok := k.keys[keyID]
	k.mu.RUnlock()
	if !ok {
		return Key{}, fmt.Errorf("%w: intent %s: key %s is not trusted", ErrUnknownSigner, h, keyID)
	}
	return key, nil
}

func badSignature(sr *SignedReceipt, key Key) error {
	return fmt.Errorf("%w: intent %s: signature does not verify under key %s (executor %s)", ErrBadSignature, sr.Intent, sr.KeyID, key.Name)
}

// postcheck runs Verify's steps after the signature: executor name, the
// key's authority over the effect, payload.
func postcheck(sr *SignedReceipt, key Key) (string, error) {
	if sr.Executor != key.Name {
		return "", fmt.Errorf("%w: intent %s: receipt says executor %q, key %s belongs to %q", ErrExecutorMismatch, sr.Intent, sr.Executor, sr.KeyID, key.Name)
	}
	if !key.Allows(sr.Effect) {
		return "", key.notAllowed("receipt", sr.Intent, sr.Effect)
	}
	if err := sr.checkPayload(); err != nil {
		return "", err
	}
	return key.Name, nil
}

// Verifier verifies receipts submitted concurrently in batches, the way a
// group commit writes concurrent steps in one transaction: each worker takes
// whatever is waiting (up to MaxBatch) and verifies it together, so no
// receipt waits for a batch to fill and a busy world verifies in large
// batches. A receipt that arrives alone is verified alone.
type Verifier struct {
	k    *Keyring
	max  int
	reqs chan *verifyReq
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	batches, verified atomic.Uint64
}

type verifyReq struct {
	sr   *SignedReceipt
	res  Verified
	done chan struct{}
}

// MaxBatch is the most receipts a Verifier checks in one batch: beyond 64
// the saving per signature is small and the batch's latency keeps growing.
const MaxBatch = 64

// NewVerifier starts a Verifier over k with workers goroutines (0: one per
// two CPUs, at least one). Close stops them.
func NewVerifier(k *Keyring, workers int) *Verifier {
	v := newVerifier(k)
	v.start(workers)
	return v
}

func newVerifier(k *Keyring) *Verifier {
	return &Verifier{k: k, max: MaxBatch, reqs: make(chan *verifyReq, 4*MaxBatch), done: make(chan struct{})}
}

func (v *Verifier) start(workers int) {
	if workers <= 0 {
		workers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	for range workers {
		v.wg.Add(1)
		go v.work()
	}
}

// Stats reports how many batches the workers verified and how many receipts
// they held: their ratio is the mean batch size.
func (v *Verifier) Stats() (batches, receipts uint64) {
	return v.batches.Load(), v.verified.Load()
}

// Verify is Keyring.Verify, batched with concurrent callers. After Close it
// verifies in the caller's goroutine.
func (v *Verifier) Verify(ctx context.Context, sr *SignedReceipt) (string, error) {
	r := &verifyReq{sr: sr, done: make(chan struct{})}
	select {
	case v.reqs <- r:
	case <-v.done:
		return v.k.Verify(*sr)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case <-r.done:
		return r.res.Executor, r.res.Err
	case <-v.done: // stopped with r queued: judge it here (the same verdict)
		return v.k.Verify(*sr)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Close stops the workers. Verify keeps working, unbatched.
func (v *Verifier) Close() {
	v.once.Do(func() { close(v.done) })
	v.wg.Wait()
}

func (v *Verifier) work() {
	defer v.wg.Done()
	batch := make([]*verifyReq, 0, v.max)
	srs := make([]SignedReceipt, 0, v.max)
	for {
		select {
		case r := <-v.reqs:
			batch = append(batch[:0], r)
		case <-v.done:
			return
		}
		// Let runnable submitters (typically executors signing their
		// receipts) run first: one signature check alone costs nearly twice
		// its share of a batch, and under load more receipts are a yield
		// away. When nothing else is runnable this returns at once.
		runtime.Gosched()
	fill:
		for len(batch) < v.max {
			select {
			case r := <-v.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		v.batches.Add(1)
		v.verified.Add(uint64(len(batch)))
		if len(batch) == 1 {
			r := batch[0]
			r.res.Executor, r.res.Err = v.k.Verify(*r.sr)
			close(r.done)
			batch[0] = nil
			continue
		}
		srs = srs[:0]
		for _, r := range batch {
			srs = append(srs, *r.sr)
		}
		for i, res := range v.k.VerifyBatch(srs) {
			batch[i].res = res
			close(batch[i].done)
		}
		clear(batch) // hold no receipt past its batch
		clear(srs)
	}
}
