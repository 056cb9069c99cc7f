// The language-neutral test vectors (docs/receipt-vectors.json, generated
// and checked by receipts/vectors_test.go) reproduced with this package:
// the same payload bytes, bodies and signatures, and signatures that
// verify. The file is read with parseJSON, because attempt and seq go up to
// 2^64-1, which JSON.parse would round, and each member is checked as it is
// read into the types below, so a vectors file of another shape fails here
// rather than passing vacuously.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createPublicKey } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { type JSONValue, CanonicalError, encodeCanonical, member, parseJSON, payloadFromJSON } from '../lib/canonical.js'
import {
  type Frame, type Receipt, type Status, FRAME_DOMAIN, RECEIPT_DOMAIN, STATUSES, frameBody, keyId, privateKeyFromSeed,
  publicKeyBytes, receiptBody, signFrame, signReceipt, verifySignature
} from '../lib/receipts.js'

// ---- the file, read and checked ----

/** One member of v, which must be there and pass check. */
function want<T extends JSONValue> (v: JSONValue | undefined, name: string, check: (x: JSONValue) => x is T, what: string): T {
  const x = member(v, name)
  if (x === undefined || !check(x)) {
    throw new Error(`receipt-vectors.json: ${name} is not ${what}: ${String(x)}`)
  }
  return x
}
const isString = (x: JSONValue): x is string => typeof x === 'string'
const isUint = (x: JSONValue): x is number | bigint => (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0) || (typeof x === 'bigint' && x >= 0n)
const isArray = (x: JSONValue): x is JSONValue[] => Array.isArray(x)
const isStatus = (x: JSONValue): x is Status => typeof x === 'string' && (STATUSES as readonly string[]).includes(x)
const str = (v: JSONValue | undefined, name: string): string => want(v, name, isString, 'a string')
const optStr = (v: JSONValue | undefined, name: string): string | undefined => member(v, name) === undefined ? undefined : str(v, name)
const list = (v: JSONValue | undefined, name: string): JSONValue[] => want(v, name, isArray, 'an array')

interface KeyVector { seed_hex: string, public_key_hex: string, key_id: string, public_key_pem: string, private_key_pem: string }
interface PayloadVector { name: string, json: string, cbor_hex: string }
interface RefusedVector { name: string, input: string | Uint8Array }
/** A receipt's or frame's HTTP form as Go writes it: JSON members, payload as a value or as payload_cbor. */
type HTTPVector = Record<string, JSONValue>
interface ReceiptVector { name: string, fields: Receipt, body_hex: string, signature_hex: string, http: HTTPVector }
interface FrameVector { name: string, fields: Frame, body_hex: string, signature_hex: string, http: HTTPVector }
interface Vectors {
  version: number | bigint
  receipt_domain_hex: string
  frame_domain_hex: string
  key: KeyVector
  payloads: PayloadVector[]
  refused_payloads: RefusedVector[]
  receipts: ReceiptVector[]
  frames: FrameVector[]
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex')
const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'))

function httpForm (v: JSONValue): HTTPVector {
  const h = member(v, 'http')
  if (typeof h !== 'object' || h === null || Array.isArray(h)) {
    throw new Error(`receipt-vectors.json: http is not an object: ${String(h)}`)
  }
  return h
}

function readVectors (file: URL): Vectors {
  const vf = parseJSON(readFileSync(file))
  const key = member(vf, 'key')
  return {
    version: want(vf, 'version', isUint, 'an integer'),
    receipt_domain_hex: str(vf, 'receipt_domain_hex'),
    frame_domain_hex: str(vf, 'frame_domain_hex'),
    key: {
      seed_hex: str(key, 'seed_hex'),
      public_key_hex: str(key, 'public_key_hex'),
      key_id: str(key, 'key_id'),
      public_key_pem: str(key, 'public_key_pem'),
      private_key_pem: str(key, 'private_key_pem')
    },
    payloads: list(vf, 'payloads').map((p) => ({ name: str(p, 'name'), json: str(p, 'json'), cbor_hex: str(p, 'cbor_hex') })),
    refused_payloads: list(vf, 'refused_payloads').map((p) => {
      const jsonHex = optStr(p, 'json_hex')
      return { name: str(p, 'name'), input: jsonHex !== undefined ? unhex(jsonHex) : (optStr(p, 'json') ?? '') }
    }),
    receipts: list(vf, 'receipts').map((r) => {
      const f = member(r, 'fields')
      return {
        name: str(r, 'name'),
        fields: {
          world: str(f, 'world'),
          intentHash: str(f, 'intent_hash'),
          effect: str(f, 'effect'),
          executor: str(f, 'executor'),
          status: want(f, 'status', isStatus, 'ok, error or timeout'),
          attempt: want(f, 'attempt', isUint, 'an integer'),
          issuerRef: optStr(f, 'issuer_ref'),
          payload: unhex(str(f, 'payload_cbor_hex'))
        },
        body_hex: str(r, 'body_hex'),
        signature_hex: str(r, 'signature_hex'),
        http: httpForm(r)
      }
    }),
    frames: list(vf, 'frames').map((r) => {
      const f = member(r, 'fields')
      return {
        name: str(r, 'name'),
        fields: {
          world: str(f, 'world'),
          intentHash: str(f, 'intent_hash'),
          effect: str(f, 'effect'),
          seq: want(f, 'seq', isUint, 'an integer'),
          executor: str(f, 'executor'),
          payload: unhex(str(f, 'payload_cbor_hex'))
        },
        body_hex: str(r, 'body_hex'),
        signature_hex: str(r, 'signature_hex'),
        http: httpForm(r)
      }
    })
  }
}

// dist/test/ when compiled: the repository root is three levels up from
// the package.
const vf = readVectors(new URL('../../../../docs/receipt-vectors.json', import.meta.url))
const key = privateKeyFromSeed(unhex(vf.key.seed_hex))

/** An HTTP form without its payload members: the rest must match exactly. */
function withoutPayload (h: HTTPVector): HTTPVector {
  const { payload: _, payload_cbor: __, ...rest } = h
  return rest
}

/** The HTTP form this package wrote, parsed as the daemon would. */
function ourHTTP (json: string): HTTPVector {
  const v = parseJSON(json)
  assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), json)
  return v
}

test('the file has every section', () => {
  assert.equal(vf.version, 2)
  assert.equal(RECEIPT_DOMAIN, 'aos/receipt/v2\0')
  assert.equal(FRAME_DOMAIN, 'aos/frame/v2\0')
  for (const section of [vf.payloads, vf.refused_payloads, vf.receipts, vf.frames]) {
    assert.ok(section.length > 0)
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
      assert.throws(() => payloadFromJSON(p.input), CanonicalError)
    })
  }
})

test('receipts: body, signature, verification, HTTP form', async (t) => {
  const pub = createPublicKey(vf.key.public_key_pem)
  for (const v of vf.receipts) {
    await t.test(v.name, () => {
      assert.equal(hex(receiptBody(v.fields)), v.body_hex)
      const signed = signReceipt(key, v.fields)
      assert.equal(hex(signed.body), v.body_hex)
      assert.equal(hex(signed.signature), v.signature_hex)
      assert.equal(signed.keyId, vf.key.key_id)
      assert.ok(verifySignature(pub, 'receipt', unhex(v.body_hex), unhex(v.signature_hex)))
      assert.ok(!verifySignature(pub, 'frame', unhex(v.body_hex), unhex(v.signature_hex)), 'a receipt signature passes as a frame signature')
      // The HTTP form carries what Go's does, the payload as the signed bytes.
      const wire = ourHTTP(signed.json)
      assert.deepEqual(withoutPayload(wire), withoutPayload(v.http))
      const ours = wire['payload_cbor']
      assert.ok(typeof ours === 'string')
      assert.equal(hex(Buffer.from(ours, 'base64')), hex(v.fields.payload))
      if (v.http['payload'] !== undefined) {
        assert.equal(hex(encodeCanonical(v.http['payload'])), hex(v.fields.payload), 'the JSON payload is the same value')
      } else {
        assert.equal(v.http['payload_cbor'], ours)
      }
    })
  }
})

test('frames: body, signature, verification', async (t) => {
  const pub = createPublicKey(vf.key.public_key_pem)
  for (const v of vf.frames) {
    await t.test(v.name, () => {
      assert.equal(hex(frameBody(v.fields)), v.body_hex)
      const signed = signFrame(key, v.fields)
      assert.equal(hex(signed.signature), v.signature_hex)
      assert.ok(verifySignature(pub, 'frame', unhex(v.body_hex), unhex(v.signature_hex)))
      assert.deepEqual(withoutPayload(ourHTTP(signed.json)), withoutPayload(v.http))
    })
  }
})

test('the same receipt for another world is another body and signature', () => {
  const [a, , b] = vf.receipts
  assert.ok(a !== undefined && b !== undefined && a.fields.world !== b.fields.world)
  assert.deepEqual({ ...a.fields, world: b.fields.world }, b.fields)
  assert.notEqual(a.body_hex, b.body_hex)
  assert.notEqual(a.signature_hex, b.signature_hex)
  assert.equal(hex(receiptBody({ ...a.fields, world: b.fields.world })), b.body_hex)
})

test('a changed field breaks the signature', () => {
  const pub = createPublicKey(vf.key.public_key_pem)
  const v = vf.receipts[0]
  assert.ok(v !== undefined)
  const sig = unhex(v.signature_hex)
  const changes: Array<Partial<Receipt>> = [{ status: 'error' }, { attempt: 2 }, { executor: 'other' }, { issuerRef: 'x' }, { payload: encodeCanonical({}) },
    { world: 'world:00112233445566778899aabbccddeeff' }]
  for (const change of changes) {
    const body = receiptBody({ ...v.fields, ...change })
    assert.ok(!verifySignature(pub, 'receipt', body, sig), JSON.stringify(Object.keys(change)))
  }
})
