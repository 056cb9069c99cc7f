// The language-neutral test vectors (docs/receipt-vectors.json, generated
// and checked by receipts/vectors_test.go) reproduced with this package:
// the same payload bytes, bodies and signatures, and signatures that
// verify. The file is read with parseJSON, because attempt and seq go up to
// 2^64-1, which JSON.parse would round.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createPublicKey } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { CanonicalError, encodeCanonical, parseJSON, payloadFromJSON } from '../lib/canonical.js'
import {
  FRAME_DOMAIN, RECEIPT_DOMAIN, frameBody, keyId, privateKeyFromSeed, publicKeyBytes,
  receiptBody, signFrame, signReceipt, verifySignature
} from '../lib/receipts.js'

const vectorsURL = new URL('../../../docs/receipt-vectors.json', import.meta.url)
/** @type {any} */
const vf = parseJSON(readFileSync(vectorsURL))
const hex = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString('hex')
const unhex = (/** @type {string} */ s) => new Uint8Array(Buffer.from(s, 'hex'))
const key = privateKeyFromSeed(unhex(vf.key.seed_hex))

test('the file has every section', () => {
  assert.equal(vf.version, 1)
  for (const section of ['payloads', 'refused_payloads', 'receipts', 'frames']) {
    assert.ok(vf[section].length > 0, section)
  }
})

test('key: public key, key id, PEM forms and domains', () => {
  assert.equal(hex(publicKeyBytes(key)), vf.key.public_key_hex)
  assert.equal(keyId(key), vf.key.key_id)
  const pub = createPublicKey(vf.key.public_key_pem)
  assert.equal(hex(publicKeyBytes(pub)), vf.key.public_key_hex)
  assert.equal(keyId(pub), vf.key.key_id)
  const fromPEM = privateKeyFromSeed(unhex(vf.key.seed_hex)).export({ format: 'pem', type: 'pkcs8' })
  assert.equal(fromPEM, vf.key.private_key_pem)
  assert.equal(hex(Buffer.from(RECEIPT_DOMAIN, 'latin1')), vf.receipt_domain_hex)
  assert.equal(hex(Buffer.from(FRAME_DOMAIN, 'latin1')), vf.frame_domain_hex)
})

test('payloads: JSON text to canonical CBOR', async (t) => {
  for (const p of vf.payloads) {
    await t.test(p.name, () => {
      assert.equal(hex(payloadFromJSON(p.json)), p.cbor_hex)
      // The same from UTF-8 bytes, and from the parsed value re-encoded.
      assert.equal(hex(payloadFromJSON(Buffer.from(p.json))), p.cbor_hex)
      assert.equal(hex(encodeCanonical(parseJSON(p.json))), p.cbor_hex)
    })
  }
})

test('refused payloads are refused here too', async (t) => {
  for (const p of vf.refused_payloads) {
    await t.test(p.name, () => {
      const input = p.json_hex !== undefined ? unhex(p.json_hex) : p.json
      assert.throws(() => payloadFromJSON(input), CanonicalError)
    })
  }
})

/** @param {any} f */
const receiptOf = (f) => ({
  intentHash: f.intent_hash,
  effect: f.effect,
  executor: f.executor,
  status: f.status,
  attempt: f.attempt,
  issuerRef: f.issuer_ref,
  payload: unhex(f.payload_cbor_hex)
})

test('receipts: body, signature, verification, HTTP form', async (t) => {
  const pub = createPublicKey(vf.key.public_key_pem)
  for (const v of vf.receipts) {
    await t.test(v.name, () => {
      const r = receiptOf(v.fields)
      assert.equal(hex(receiptBody(r)), v.body_hex)
      const signed = signReceipt(key, r)
      assert.equal(hex(signed.body), v.body_hex)
      assert.equal(hex(signed.signature), v.signature_hex)
      assert.equal(signed.keyId, vf.key.key_id)
      assert.ok(verifySignature(pub, 'receipt', unhex(v.body_hex), unhex(v.signature_hex)))
      assert.ok(!verifySignature(pub, 'frame', unhex(v.body_hex), unhex(v.signature_hex)), 'a receipt signature passes as a frame signature')
      // The HTTP form carries what Go's does, the payload as the signed bytes.
      const wire = /** @type {any} */ (parseJSON(signed.json))
      const { payload: _, payload_cbor: __, ...goRest } = v.http
      const { payload_cbor: ours, ...rest } = wire
      assert.deepEqual(rest, goRest)
      assert.equal(hex(Buffer.from(ours, 'base64')), v.fields.payload_cbor_hex)
      if (v.http.payload !== undefined) {
        assert.equal(hex(encodeCanonical(v.http.payload)), v.fields.payload_cbor_hex, 'the JSON payload is the same value')
      } else {
        assert.equal(v.http.payload_cbor, ours)
      }
    })
  }
})

test('frames: body, signature, verification', async (t) => {
  const pub = createPublicKey(vf.key.public_key_pem)
  for (const v of vf.frames) {
    await t.test(v.name, () => {
      const f = {
        intentHash: v.fields.intent_hash,
        effect: v.fields.effect,
        seq: v.fields.seq,
        executor: v.fields.executor,
        payload: unhex(v.fields.payload_cbor_hex)
      }
      assert.equal(hex(frameBody(f)), v.body_hex)
      const signed = signFrame(key, f)
      assert.equal(hex(signed.signature), v.signature_hex)
      assert.ok(verifySignature(pub, 'frame', unhex(v.body_hex), unhex(v.signature_hex)))
      const { payload: _, payload_cbor: __, ...goRest } = v.http
      const { payload_cbor: ___, ...rest } = /** @type {any} */ (parseJSON(signed.json))
      assert.deepEqual(rest, goRest)
    })
  }
})

test('a changed field breaks the signature', () => {
  const pub = createPublicKey(vf.key.public_key_pem)
  const v = vf.receipts[0]
  const sig = unhex(v.signature_hex)
  for (const change of [{ status: 'error' }, { attempt: 2 }, { executor: 'other' }, { issuerRef: 'x' }, { payload: encodeCanonical({}) }]) {
    const body = receiptBody({ ...receiptOf(v.fields), ...change })
    assert.ok(!verifySignature(pub, 'receipt', body, sig), JSON.stringify(Object.keys(change)))
  }
})
