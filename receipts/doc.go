// Package receipts owns what an executor sends back for an effect intent:
// the receipt body, its ed25519 signature, the world's keyring of trusted
// executor keys, the fence that lets each intent settle at most once, and
// the ordering of stream frames. It does not own intents (the kernel
// computes intent hashes from kernel.IntentID), payload schemas (the kernel
// validates payloads with schemas.Registry), the journal, or delivery. It
// must not import the kernel; the kernel imports it.
//
// # Signatures
//
// A signature covers Domain ("aos/receipt/v1\x00") followed by the
// canonical CBOR of the Receipt body (see Receipt for the exact map).
//
// Domain separation: the same executor key may one day sign other things
// (stream frames, claims, health reports). Prefixing a fixed label makes a
// signature over one kind of message useless as a signature over another,
// even if their bytes happened to coincide, and the version in the label
// lets the layout change without old signatures validating new layouts.
//
// Canonical body: the signature is over the canonical bytes, not over the
// JSON an executor posted, so any two encodings of the same receipt (JSON
// key order, number spelling, base64 vs JSON payload) verify the same, and
// the kernel can journal the decoded receipt in canonical CBOR and
// re-verify it on replay or audit without keeping the original request.
// Every field the kernel acts on is inside the signed body: intent hash,
// effect, executor, status, payload, attempt, issuer_ref. Flipping any of
// them breaks the signature. The executor name is bound to the key: a key
// trusted for executor "timer" cannot sign receipts claiming "http".
//
// Key ids are "ed25519:" + hex of the first 16 bytes of SHA-256 of the
// 32-byte public key. The id only selects a key; trust comes from the
// signature verifying under the key the keyring holds for that id.
//
// # Fencing
//
// Fence guarantees, for calls made in journal order:
//
//   - an intent settles at most once: Settle returns true once per Open;
//   - a receipt is acceptable only while its intent is pending; afterwards
//     it is refused with ErrSettled (a duplicate: the kernel journals it as
//     dropped) and, for intents never opened, ErrUnknownIntent;
//   - answers depend only on the call sequence, so replay gives the same
//     answers.
//
// Safety rests on the pending set alone; the settled set only classifies
// refusals, so Forget (after a snapshot) bounds memory without ever
// letting a duplicate through.
//
// # What the kernel must do with a posted receipt
//
// All within one step of its loop, so nothing interleaves, and journaled:
//
//  1. FromJSON (HTTP) or Unmarshal (journal): structure.
//  2. Keyring.Verify: trusted key, good signature, executor bound to key.
//     Refusals change nothing (DESIGN.md §10.7). This is the costly step
//     (about 30µs alone, 16-20µs in a batch; see docs/receipts.md), so the
//     kernel runs it before the loop step through a Verifier, which
//     batches concurrent receipts (VerifyBatch gives Verify's verdicts).
//  3. Fence.Check: pending? ErrSettled -> journal "dropped duplicate";
//     ErrUnknownIntent -> refuse.
//  4. Validate the payload against the effect's receipt schema; a failure
//     still settles the intent (sys/EffectReceiptRejected@1 or instance
//     failed).
//  5. Journal the receipt record, then Fence.Settle(h, seq) and
//     FrameSeq.Close(h).
//  6. Deliver sys/EffectReceiptEnvelope@1 to the origin cell's mailbox.
//
// On replay the kernel rebuilds the fence by calling Open for each intent
// record and Settle for each settling record, in journal order. When an
// instance fails, the kernel settles its remaining pending intents (with
// the failure's seq) so their late receipts are dropped as duplicates.
//
// # Concurrency
//
// Keyring, Fence and FrameSeq are safe for concurrent use; each call is
// atomic. Determinism comes from the kernel calling them in journal order.
package receipts
