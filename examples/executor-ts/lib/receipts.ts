// @ts-check
/**
 * Receipts and stream frames: their canonical bodies, ed25519 signatures,
 * key ids, key files and the HTTP JSON form (docs/executor-protocol.md,
 * checked byte for byte against docs/receipt-vectors.json).
 *
 * A receipt's signature covers "aos/receipt/v1\0" followed by the canonical
 * CBOR map {effect, status, attempt, payload, executor, issuer_ref?,
 * intent_hash}; a frame's covers "aos/frame/v1\0" followed by {seq, effect,
 * payload, executor, intent_hash}. The payload inside is itself a byte
 * string: the canonical CBOR of the payload value.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto'
import { closeSync, fstatSync, openSync, readFileSync, writeSync } from 'node:fs'
import { encodeCanonical } from './canonical.js'

export const RECEIPT_DOMAIN = 'aos/receipt/v1\0'
export const FRAME_DOMAIN = 'aos/frame/v1\0'
export const KEY_ID_PREFIX = 'ed25519:'
export const STATUSES = Object.freeze(['ok', 'error', 'timeout'])
/** Effect names, executor names and issuer refs are at most this many bytes. */
export const MAX_NAME_LEN = 256
const U64_MAX = (1n << 64n) - 1n

/** A receipt or frame that the daemon would refuse whatever its signature. */
export class MalformedError extends Error {
  /** @param {string} message */
  constructor (message) {
    super(message)
    this.name = 'MalformedError'
  }
}

/**
 * The 32 bytes of an intent hash written "sha256:<64 lower-case hex>".
 * @param {string} s
 * @returns {Uint8Array}
 */
export function intentHashBytes (s) {
  if (typeof s !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(s)) {
    throw new MalformedError(`intent hash ${JSON.stringify(s)} is not sha256:<64 lower-case hex digits>`)
  }
  return new Uint8Array(Buffer.from(s.slice(7), 'hex'))
}

/**
 * Refuses names the daemon refuses: empty (when required), longer than 256
 * UTF-8 bytes, or holding a space, a control character or U+FFFD.
 * @param {string} what
 * @param {unknown} s
 * @param {boolean} required
 */
function checkName (what, s, required) {
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

/**
 * @param {string} what
 * @param {unknown} n
 * @param {number} min
 * @returns {number | bigint}
 */
function checkUint (what, n, min) {
  const ok = (typeof n === 'number' && Number.isSafeInteger(n)) || (typeof n === 'bigint' && n <= U64_MAX)
  if (!ok || /** @type {number | bigint} */ (n) < min) {
    throw new MalformedError(`${what} ${String(n)} is not an integer in [${min}, 2^64-1]`)
  }
  return /** @type {number | bigint} */ (n)
}

/**
 * @param {string} what
 * @param {unknown} p
 * @returns {Uint8Array}
 */
function checkPayload (what, p) {
  if (!(p instanceof Uint8Array) || p.length === 0) {
    throw new MalformedError(`${what} payload must be the canonical CBOR bytes of a value (encodeCanonical), got ${p instanceof Uint8Array ? 'no bytes' : typeof p}`)
  }
  return p
}

/**
 * @typedef {object} Receipt
 * @property {string} intentHash "sha256:<hex>", as a claim gives it
 * @property {string} effect the intent's effect
 * @property {string} executor the name the key is trusted under
 * @property {'ok' | 'error' | 'timeout'} status
 * @property {number | bigint} attempt how many attempts it took (informational)
 * @property {Uint8Array} payload canonical CBOR of the receipt value
 * @property {string} [issuerRef] left out of the body when empty
 */

/**
 * The canonical CBOR body of a receipt: what is signed (after the domain).
 * @param {Receipt} r
 * @returns {Uint8Array}
 */
export function receiptBody (r) {
  const intent = intentHashBytes(r.intentHash)
  if (!STATUSES.includes(r.status)) {
    throw new MalformedError(`intent ${r.intentHash}: status ${JSON.stringify(r.status)} is not one of ok, error, timeout`)
  }
  checkName('effect', r.effect, true)
  checkName('executor', r.executor, true)
  checkName('issuer_ref', r.issuerRef, false)
  /** @type {Record<string, unknown>} */
  const body = {
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

/**
 * @typedef {object} Frame
 * @property {string} intentHash
 * @property {string} effect the intent's effect
 * @property {number | bigint} seq this executor's frame number for the intent, from 1, rising
 * @property {string} executor
 * @property {Uint8Array} payload canonical CBOR of the progress value
 */

/**
 * The canonical CBOR body of a stream frame.
 * @param {Frame} f
 * @returns {Uint8Array}
 */
export function frameBody (f) {
  const intent = intentHashBytes(f.intentHash)
  checkName('effect', f.effect, true)
  checkName('executor', f.executor, true)
  return encodeCanonical({
    seq: checkUint('seq', f.seq, 1),
    effect: f.effect,
    payload: checkPayload('frame', f.payload),
    executor: f.executor,
    intent_hash: intent
  })
}

/**
 * @param {string} domain
 * @param {Uint8Array} body
 */
function message (domain, body) {
  return Buffer.concat([Buffer.from(domain, 'latin1'), body])
}

/** @param {Uint8Array} body */
export const receiptSigningMessage = (body) => message(RECEIPT_DOMAIN, body)
/** @param {Uint8Array} body */
export const frameSigningMessage = (body) => message(FRAME_DOMAIN, body)

/**
 * The raw 32 bytes of an ed25519 public key.
 * @param {import('node:crypto').KeyObject} key a public or private key
 * @returns {Buffer}
 */
export function publicKeyBytes (key) {
  const pub = key.type === 'private' ? createPublicKey(key) : key
  const jwk = pub.export({ format: 'jwk' })
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new MalformedError(`not an ed25519 key (${pub.asymmetricKeyType})`)
  }
  return Buffer.from(jwk.x, 'base64url')
}

/**
 * "ed25519:" + hex of the first 16 bytes of SHA-256 of the public key.
 * @param {import('node:crypto').KeyObject} key
 */
export function keyId (key) {
  return KEY_ID_PREFIX + createHash('sha256').update(publicKeyBytes(key)).digest('hex').slice(0, 32)
}

// PKCS #8 wrapping of a raw ed25519 seed (RFC 8410).
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

/**
 * The private key of a 32-byte seed.
 * @param {Uint8Array} seed
 */
export function privateKeyFromSeed (seed) {
  if (seed.length !== 32) {
    throw new MalformedError(`an ed25519 seed is 32 bytes, got ${seed.length}`)
  }
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' })
}

/**
 * @typedef {object} Signed
 * @property {Uint8Array} body the canonical body
 * @property {Buffer} signature 64 bytes
 * @property {string} keyId
 * @property {string} json the request body for POST /v1/receipts or /v1/frames
 */

/**
 * Signs a receipt with key.
 * @param {import('node:crypto').KeyObject} key
 * @param {Receipt} r
 * @returns {Signed}
 */
export function signReceipt (key, r) {
  const body = receiptBody(r)
  const signature = sign(null, receiptSigningMessage(body), key)
  const id = keyId(key)
  /** @type {Record<string, string | number | bigint>} */
  const wire = {
    attempt: r.attempt,
    effect: r.effect,
    executor: r.executor,
    intent_hash: r.intentHash,
    key_id: id,
    payload_cbor: Buffer.from(r.payload).toString('base64'),
    signature: signature.toString('base64'),
    status: r.status
  }
  if (r.issuerRef) {
    wire.issuer_ref = r.issuerRef
  }
  return { body, signature, keyId: id, json: wireJSON(wire) }
}

/**
 * Signs a stream frame with key.
 * @param {import('node:crypto').KeyObject} key
 * @param {Frame} f
 * @returns {Signed}
 */
export function signFrame (key, f) {
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
      signature: signature.toString('base64')
    })
  }
}

/**
 * Verifies a signature over domain || body with an ed25519 public key.
 * @param {import('node:crypto').KeyObject} pub
 * @param {'receipt' | 'frame'} kind
 * @param {Uint8Array} body
 * @param {Uint8Array} signature
 */
export function verifySignature (pub, kind, body, signature) {
  const msg = kind === 'receipt' ? receiptSigningMessage(body) : frameSigningMessage(body)
  return signature.length === 64 && verify(null, msg, pub, signature)
}

/**
 * The HTTP form: compact JSON, sorted keys. The payload goes as
 * payload_cbor, the very bytes signed, so no JSON conversion stands between
 * the signature and what the daemon checks. Written by hand because
 * JSON.stringify cannot write a bigint (attempt and seq may exceed 2^53).
 * @param {Record<string, string | number | bigint>} wire
 */
function wireJSON (wire) {
  const parts = Object.keys(wire).sort().map((k) => {
    const v = wire[k]
    return JSON.stringify(k) + ':' + (typeof v === 'string' ? JSON.stringify(v) : String(v))
  })
  return '{' + parts.join(',') + '}'
}

// ---- key files: PKCS #8 / PKIX PEM, interchangeable with aosd's ----

/**
 * Reads a PEM PKCS #8 ed25519 private key, refusing a file that group or
 * others may read or write (as aosd does).
 * @param {string} path
 */
export function readPrivateKeyFile (path) {
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
 * @param {string} path
 * @param {string} text
 */
function writeNew (path, text) {
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
 * @param {string} path
 */
export function createKeyFiles (path) {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  writeNew(path, /** @type {string} */ (privateKey.export({ format: 'pem', type: 'pkcs8' })))
  writeNew(path + '.pub.pem', /** @type {string} */ (publicKey.export({ format: 'pem', type: 'spki' })))
  return privateKey
}
