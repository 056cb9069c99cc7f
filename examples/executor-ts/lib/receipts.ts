/**
 * Receipts and stream frames: their canonical bodies, ed25519 signatures,
 * key ids, key files and the HTTP JSON form (docs/executor-protocol.md,
 * checked byte for byte against docs/receipt-vectors.json).
 *
 * A receipt's signature covers "aos/receipt/v2\0" followed by the canonical
 * CBOR map {world, effect, status, attempt, payload, executor, issuer_ref?,
 * intent_hash}; a frame's covers "aos/frame/v2\0" followed by {seq, world,
 * effect, payload, executor, intent_hash}. The world is the identity of the
 * world the intent belongs to, as the claim answers it: a world refuses a
 * receipt or frame signed for another (or for none, the v1 layout). The
 * payload inside is itself a byte string: the canonical CBOR of the payload
 * value.
 */
import { type KeyObject, createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto'
import { closeSync, fstatSync, openSync, readFileSync, writeSync } from 'node:fs'
import { encodeCanonical } from './canonical.js'

export const RECEIPT_DOMAIN = 'aos/receipt/v2\0'
export const FRAME_DOMAIN = 'aos/frame/v2\0'
export const KEY_ID_PREFIX = 'ed25519:'
export const STATUSES = Object.freeze(['ok', 'error', 'timeout'] as const)
/** A receipt's status. */
export type Status = typeof STATUSES[number]
/** Effect names, executor names, issuer refs and worlds are at most this many bytes. */
export const MAX_NAME_LEN = 256
const U64_MAX = (1n << 64n) - 1n

/** A receipt or frame that the daemon would refuse whatever its signature. */
export class MalformedError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'MalformedError'
  }
}

/** The 32 bytes of an intent hash written "sha256:<64 lower-case hex>". */
export function intentHashBytes (s: string): Uint8Array {
  if (typeof s !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(s)) {
    throw new MalformedError(`intent hash ${JSON.stringify(s)} is not sha256:<64 lower-case hex digits>`)
  }
  return new Uint8Array(Buffer.from(s.slice(7), 'hex'))
}

/**
 * Refuses names the daemon refuses: empty (when required), longer than 256
 * UTF-8 bytes, or holding a space, a control character or U+FFFD. It
 * takes unknown: a receipt built from parsed JSON is checked, not trusted.
 */
function checkName (what: string, s: unknown, required: boolean): void {
  if (s === undefined || s === '') {
    if (required) {
      throw new MalformedError(`${what} is empty`)
    }
    return
  }
  if (typeof s !== 'string') {
    throw new MalformedError(`${what} is not a string`)
  }
  if (Buffer.byteLength(s) > MAX_NAME_LEN) {
    throw new MalformedError(`${what} is longer than ${MAX_NAME_LEN} bytes`)
  }
  if (!s.isWellFormed() || /[\u0000-\u0020\u007f\ufffd]/u.test(s)) {
    throw new MalformedError(`${what} ${JSON.stringify(s)} holds a space, control or invalid character`)
  }
}

function isUint (n: unknown): n is number | bigint {
  return (typeof n === 'number' && Number.isSafeInteger(n)) || (typeof n === 'bigint' && n <= U64_MAX)
}

function checkUint (what: string, n: unknown, min: number): number | bigint {
  if (!isUint(n) || n < min) {
    throw new MalformedError(`${what} ${String(n)} is not an integer in [${min}, 2^64-1]`)
  }
  return n
}

function checkPayload (what: string, p: unknown): Uint8Array {
  if (!(p instanceof Uint8Array) || p.length === 0) {
    throw new MalformedError(`${what} payload must be the canonical CBOR bytes of a value (encodeCanonical), got ${p instanceof Uint8Array ? 'no bytes' : typeof p}`)
  }
  return p
}

/** A receipt, before it is signed. */
export interface Receipt {
  /** the world's identity, as the claim answers it ("world:<hex>") */
  world: string
  /** "sha256:<hex>", as a claim gives it */
  intentHash: string
  /** the intent's effect */
  effect: string
  /** the name the key is trusted under */
  executor: string
  status: Status
  /** how many attempts it took (informational) */
  attempt: number | bigint
  /** canonical CBOR of the receipt value */
  payload: Uint8Array
  /** left out of the body when empty */
  issuerRef?: string | undefined
}

/**
 * The signed body of a receipt, as CBOR map keys: what receiptBody encodes.
 * The payload is a byte string holding the payload value's canonical CBOR.
 */
export interface ReceiptBody {
  world: string
  effect: string
  status: Status
  attempt: number | bigint
  payload: Uint8Array
  executor: string
  issuer_ref?: string
  intent_hash: Uint8Array
}

/** The signed body of a stream frame, as CBOR map keys. */
export interface FrameBody {
  seq: number | bigint
  world: string
  effect: string
  payload: Uint8Array
  executor: string
  intent_hash: Uint8Array
}

/**
 * The canonical CBOR body of a receipt: what is signed (after the domain).
 * Its fields are checked at run time too, as a receipt may come from
 * parsed JSON.
 */
export function receiptBody (r: Receipt): Uint8Array {
  const intent = intentHashBytes(r.intentHash)
  if (!STATUSES.includes(r.status)) {
    throw new MalformedError(`intent ${r.intentHash}: status ${JSON.stringify(r.status)} is not one of ok, error, timeout`)
  }
  checkName('world', r.world, true)
  checkName('effect', r.effect, true)
  checkName('executor', r.executor, true)
  checkName('issuer_ref', r.issuerRef, false)
  const body: ReceiptBody = {
    world: r.world,
    effect: r.effect,
    status: r.status,
    attempt: checkUint('attempt', r.attempt, 0),
    payload: checkPayload('receipt', r.payload),
    executor: r.executor,
    intent_hash: intent
  }
  if (r.issuerRef) {
    body.issuer_ref = r.issuerRef
  }
  return encodeCanonical(body) // the encoder sorts the keys
}

/** A stream frame, before it is signed. */
export interface Frame {
  /** the world's identity, as the claim answers it */
  world: string
  intentHash: string
  /** the intent's effect */
  effect: string
  /** this executor's frame number for the intent, from 1, rising */
  seq: number | bigint
  executor: string
  /** canonical CBOR of the progress value */
  payload: Uint8Array
}

/** The canonical CBOR body of a stream frame. */
export function frameBody (f: Frame): Uint8Array {
  const intent = intentHashBytes(f.intentHash)
  checkName('world', f.world, true)
  checkName('effect', f.effect, true)
  checkName('executor', f.executor, true)
  const body: FrameBody = {
    seq: checkUint('seq', f.seq, 1),
    world: f.world,
    effect: f.effect,
    payload: checkPayload('frame', f.payload),
    executor: f.executor,
    intent_hash: intent
  }
  return encodeCanonical(body)
}

function message (domain: string, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(domain, 'latin1'), body])
}

export const receiptSigningMessage = (body: Uint8Array): Buffer => message(RECEIPT_DOMAIN, body)
export const frameSigningMessage = (body: Uint8Array): Buffer => message(FRAME_DOMAIN, body)

/** The raw 32 bytes of an ed25519 public key, from a public or private key. */
export function publicKeyBytes (key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key
  const jwk = pub.export({ format: 'jwk' })
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new MalformedError(`not an ed25519 key (${pub.asymmetricKeyType})`)
  }
  return Buffer.from(jwk.x, 'base64url')
}

/** "ed25519:" + hex of the first 16 bytes of SHA-256 of the public key. */
export function keyId (key: KeyObject): string {
  return KEY_ID_PREFIX + createHash('sha256').update(publicKeyBytes(key)).digest('hex').slice(0, 32)
}

// PKCS #8 wrapping of a raw ed25519 seed (RFC 8410).
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

/** The private key of a 32-byte seed. */
export function privateKeyFromSeed (seed: Uint8Array): KeyObject {
  if (seed.length !== 32) {
    throw new MalformedError(`an ed25519 seed is 32 bytes, got ${seed.length}`)
  }
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' })
}

/** A signed receipt or frame. */
export interface Signed {
  /** the canonical body */
  body: Uint8Array
  /** 64 bytes */
  signature: Buffer
  keyId: string
  /** the request body for POST /v1/receipts or /v1/frames */
  json: string
}

/** The JSON members of POST /v1/receipts (docs/API.md), payload as payload_cbor. */
export interface ReceiptWire {
  attempt: number | bigint
  effect: string
  executor: string
  intent_hash: string
  issuer_ref?: string
  key_id: string
  payload_cbor: string
  signature: string
  status: Status
  world: string
}

/** The JSON members of POST /v1/frames. */
export interface FrameWire {
  effect: string
  executor: string
  intent_hash: string
  key_id: string
  payload_cbor: string
  seq: number | bigint
  signature: string
  world: string
}

/** Signs a receipt with key. */
export function signReceipt (key: KeyObject, r: Receipt): Signed {
  const body = receiptBody(r)
  const signature = sign(null, receiptSigningMessage(body), key)
  const id = keyId(key)
  const wire: ReceiptWire = {
    attempt: r.attempt,
    effect: r.effect,
    executor: r.executor,
    intent_hash: r.intentHash,
    key_id: id,
    payload_cbor: Buffer.from(r.payload).toString('base64'),
    signature: signature.toString('base64'),
    status: r.status,
    world: r.world
  }
  if (r.issuerRef) {
    wire.issuer_ref = r.issuerRef
  }
  return { body, signature, keyId: id, json: wireJSON(wire) }
}

/** Signs a stream frame with key. */
export function signFrame (key: KeyObject, f: Frame): Signed {
  const body = frameBody(f)
  const signature = sign(null, frameSigningMessage(body), key)
  const id = keyId(key)
  return {
    body,
    signature,
    keyId: id,
    json: wireJSON({
      effect: f.effect,
      executor: f.executor,
      intent_hash: f.intentHash,
      key_id: id,
      payload_cbor: Buffer.from(f.payload).toString('base64'),
      seq: f.seq,
      signature: signature.toString('base64'),
      world: f.world
    })
  }
}

/** Verifies a signature over domain || body with an ed25519 public key. */
export function verifySignature (pub: KeyObject, kind: 'receipt' | 'frame', body: Uint8Array, signature: Uint8Array): boolean {
  const msg = kind === 'receipt' ? receiptSigningMessage(body) : frameSigningMessage(body)
  return signature.length === 64 && verify(null, msg, pub, signature)
}

/**
 * The HTTP form: compact JSON, sorted keys. The payload goes as
 * payload_cbor, the very bytes signed, so no JSON conversion stands between
 * the signature and what the daemon checks. Written by hand because
 * JSON.stringify cannot write a bigint (attempt and seq may exceed 2^53).
 */
function wireJSON (wire: ReceiptWire | FrameWire): string {
  const members: Record<string, string | number | bigint> = { ...wire }
  const parts = Object.keys(members).sort().map((k) => {
    const v = members[k]
    return JSON.stringify(k) + ':' + (typeof v === 'string' ? JSON.stringify(v) : String(v))
  })
  return '{' + parts.join(',') + '}'
}

// ---- key files: PKCS #8 / PKIX PEM, interchangeable with aosd's ----

/**
 * Reads a PEM PKCS #8 ed25519 private key, refusing a file that group or
 * others may read or write (as aosd does).
 */
export function readPrivateKeyFile (path: string): KeyObject {
  const fd = openSync(path, 'r')
  try {
    const st = fstatSync(fd)
    if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
      throw new MalformedError(`${path}: private key file is accessible to group or others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`)
    }
    const key = createPrivateKey({ key: readFileSync(fd), format: 'pem' })
    if (key.asymmetricKeyType !== 'ed25519') {
      throw new MalformedError(`${path}: a ${key.asymmetricKeyType} key, want ed25519`)
    }
    return key
  } finally {
    closeSync(fd)
  }
}

/**
 * Writes text to a new file with mode 0600; an existing file is never
 * overwritten.
 */
function writeNew (path: string, text: string): void {
  const fd = openSync(path, 'wx', 0o600)
  try {
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
}

/**
 * Makes a new ed25519 key: the private key at path (PKCS #8 PEM, 0600) and
 * the public key at path + ".pub.pem" (PKIX PEM), the form `aosd keys add`
 * takes.
 */
export function createKeyFiles (path: string): KeyObject {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519', {
    privateKeyEncoding: { format: 'pem', type: 'pkcs8' },
    publicKeyEncoding: { format: 'pem', type: 'spki' }
  })
  writeNew(path, privateKey)
  writeNew(path + '.pub.pem', publicKey)
  return createPrivateKey(privateKey)
}
