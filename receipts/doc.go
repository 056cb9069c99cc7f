// Package receipts owns what an executor signs about an effect intent: the
// receipt that settles it, the stream frames that report progress on it,
// their ed25519 signatures, and the world's keyring of trusted executor
// keys, each trusted for named effects only. It does not own intents (the
// kernel computes intent hashes from kernel.IntentID), pending or settled
// state (the kernel tracks which intents are in flight, and fences late
// receipts itself), payload schemas (the kernel validates payloads with
// schemas.Registry), the journal, or delivery. It must not import the
// kernel; the kernel imports it.
//
// # Signatures
//
// A receipt's signature covers Domain ("aos/receipt/v2\x00") followed by
// the canonical CBOR of the Receipt body; a frame's covers FrameDomain
// ("aos/frame/v2\x00") followed by the canonical CBOR of the Frame body
// (see Receipt and Frame for the exact maps). A body that names no world
// is the first layout, signed and verified under DomainV1 and
// FrameDomainV1 ("aos/receipt/v1\x00", "aos/frame/v1\x00"), so receipts
// journaled before worlds had identities still verify; the kernel refuses
// that layout when it is posted.
//
// The world: every body names the identity of the world whose intent it
// is about. Intent hashes bind the world too, but intents opened before a
// world had an identity do not, and two copies of such a world share
// them; a receipt's world is what keeps a receipt signed for one copy from
// settling the other's intent.
//
// Domain separation: the same executor key signs receipts and frames.
// Prefixing a fixed label makes a signature over one kind of message
// useless as a signature over another, even if their bytes happened to
// coincide, and the version in the label lets a layout change without old
// signatures validating new layouts.
//
// Canonical body: the signature is over the canonical bytes, not over the
// JSON an executor posted, so any two encodings of the same message (JSON
// key order, number spelling, base64 vs JSON payload) verify the same, and
// the kernel can journal the decoded message in canonical CBOR without
// keeping the original request. Every field the kernel acts on is inside
// the signed body: world, intent hash, effect, executor, status, payload,
// attempt, issuer_ref (receipts); world, intent hash, effect, seq,
// executor, payload (frames). Flipping any of them breaks the signature.
//
// Key ids are "ed25519:" + hex of the first 16 bytes of SHA-256 of the
// 32-byte public key. The id only selects a key; trust comes from the
// signature verifying under the key the keyring holds for that id.
//
// # Authority
//
// A key is trusted under one executor name and for a list of effects:
// exact effect names ("com.acme/charge@1") and namespaces ("com.acme/*").
// Keyring.Verify and VerifyFrame accept a message only if its executor is
// the key's name and its effect is one the key is allowed (Key.Allows); the
// kernel then checks that the effect is the intent's. So a key compromised
// or misused can settle only the effects it was added for. There is no key
// for every effect: Add refuses no effects and "*". The sys/ effects are
// the daemon's built-in executors': only a key trusted under
// BuiltinExecutor may be allowed them.
//
// A keyring file written before keys had effects still loads; its keys are
// allowed no effect (every receipt they sign is refused, naming the key and
// how to fix it) until Add names their effects.
//
// # What the kernel does with a posted receipt or frame
//
//  1. FromJSON / FrameFromJSON (HTTP): structure.
//  2. Keyring.Verify / VerifyFrame: trusted key, good signature, executor
//     bound to the key, effect allowed to the key. Refusals change nothing
//     (DESIGN.md §10.7). Receipt signatures are the costly step (about 30µs
//     alone, 16-20µs in a batch; see docs/receipts.md), so the kernel runs
//     them before its loop through a Verifier, which batches concurrent
//     receipts (VerifyBatch gives Verify's verdicts).
//  3. The kernel: the message must name its world (kernel.ErrWrongWorld).
//  4. In the kernel loop: the intent must be pending and of the signed
//     effect, and it settles at most once; late and duplicate receipts, and
//     frames beyond the limits, are fenced there (kernel/fence.go).
//
// The keyring is not journaled: replay trusts the receipts and frames the
// journal admitted and never verifies them again (keys may have been
// removed since).
//
// # Concurrency
//
// Keyring and Verifier are safe for concurrent use; each call is atomic.
package receipts
