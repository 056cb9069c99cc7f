// @ts-check
/**
 * Canonical CBOR as aos writes it, and payload JSON read the way the daemon
 * reads it.
 *
 * aos signs and hashes canonical CBOR: RFC 8949 §4.2.1 core deterministic
 * encoding (definite lengths, the shortest integer heads, floats in the
 * shortest IEEE 754 form that keeps the value — half-precision subnormals
 * included — and map keys sorted by their encoded bytes) plus aos's number
 * rule: an integral number in [-2^64, 2^64-1] is a CBOR integer, never a
 * float, and -0 is 0. docs/executor-protocol.md has the details and
 * docs/receipt-vectors.json the bytes (test/vectors.test.js checks them).
 *
 * The bytes are written by cbor2 in its "cde" (common deterministic
 * encoding) mode. Before it sees a value, normalize() checks it and applies
 * the number rule, because JavaScript numbers beyond 2^53 and bigints need
 * it and cbor2 would otherwise write them as floats or bignum tags. (cborg,
 * the other well-kept encoder, writes half-precision subnormals as
 * single-precision floats, which no option changes; see docs/DECISIONS.md.)
 *
 * The values: null, booleans, numbers, bigints, strings, Uint8Array (CBOR
 * byte strings; JSON has none, so a payload holding them is sent as
 * payload_cbor), arrays and plain objects. Anything else — undefined, NaN,
 * ±Infinity, integers beyond the CBOR range, strings holding a lone
 * surrogate, Maps, Dates, class instances — is refused with a
 * CanonicalError that names the JSON pointer, rather than guessed at.
 */
import { encode } from 'cbor2'

/** Nesting limit of arrays and maps: the daemon's (schemas maxDepth). */
export const MAX_DEPTH = 64
/** Elements of one array or members of one map: the daemon's decoder limit. */
export const MAX_ELEMENTS = 1 << 20

const U64_MAX = (1n << 64n) - 1n
const NEG_MIN = -(1n << 64n)

/** A value that has no canonical form, or JSON the daemon would refuse. */
export class CanonicalError extends Error {
  /**
   * @param {string} pointer JSON pointer of the offending value ("" is the whole value)
   * @param {string} message
   */
  constructor (pointer, message) {
    super(`${pointer === '' ? '/' : pointer}: ${message}`)
    this.name = 'CanonicalError'
    this.pointer = pointer
  }
}

/** @param {string} ptr @param {string | number} key */
function child (ptr, key) {
  return ptr + '/' + String(key).replaceAll('~', '~0').replaceAll('/', '~1')
}

/**
 * The canonical stand-in for a number: integral values in the CBOR integer
 * range become integers (a bigint beyond 2^53), -0 becomes 0, other finite
 * values stay floats.
 * @param {number} x
 * @param {string} ptr
 * @returns {number | bigint}
 */
function canonicalNumber (x, ptr) {
  if (!Number.isFinite(x)) {
    throw new CanonicalError(ptr, `${x} has no canonical form (NaN and ±Infinity are not JSON values)`)
  }
  if (Number.isInteger(x)) {
    if (Number.isSafeInteger(x)) {
      return x === 0 ? 0 : x // -0 is 0
    }
    const b = BigInt(x)
    if (b >= NEG_MIN && b <= U64_MAX) {
      return b
    }
  }
  return x
}

/**
 * normalize checks value and returns the equivalent value cbor2 encodes
 * canonically. It never modifies value.
 * @param {unknown} value
 * @param {string} [ptr]
 * @param {number} [depth]
 * @returns {unknown}
 */
export function normalize (value, ptr = '', depth = 0) {
  switch (typeof value) {
    case 'boolean':
    case 'string':
      if (typeof value === 'string' && !value.isWellFormed()) {
        throw new CanonicalError(ptr, 'string holds a lone UTF-16 surrogate, which is not text')
      }
      return value
    case 'number':
      return canonicalNumber(value, ptr)
    case 'bigint':
      if (value < NEG_MIN || value > U64_MAX) {
        throw new CanonicalError(ptr, `integer ${value} is outside the CBOR integer range [-2^64, 2^64-1]`)
      }
      return value
    case 'undefined':
      throw new CanonicalError(ptr, 'undefined has no canonical form (leave the member out, or use null)')
    case 'object':
      break
    default:
      throw new CanonicalError(ptr, `a ${typeof value} has no canonical form`)
  }
  if (value === null) {
    return null
  }
  if (value instanceof Uint8Array) {
    return new Uint8Array(value) // a Buffer becomes a plain byte string
  }
  if (depth >= MAX_DEPTH) {
    throw new CanonicalError(ptr, `nested deeper than ${MAX_DEPTH} arrays and maps`)
  }
  if (Array.isArray(value)) {
    if (value.length > MAX_ELEMENTS) {
      throw new CanonicalError(ptr, `array of ${value.length} elements (at most ${MAX_ELEMENTS})`)
    }
    const out = new Array(value.length)
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) {
        throw new CanonicalError(child(ptr, i), 'hole in a sparse array')
      }
      out[i] = normalize(value[i], child(ptr, i), depth + 1)
    }
    return out
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) {
    const name = proto?.constructor?.name ?? 'object'
    throw new CanonicalError(ptr, `a ${name} has no canonical form (use a plain object, an array or a Uint8Array)`)
  }
  if (Object.getOwnPropertySymbols(value).length > 0) {
    throw new CanonicalError(ptr, 'object has symbol keys; map keys are strings')
  }
  const keys = Object.keys(value)
  if (keys.length > MAX_ELEMENTS) {
    throw new CanonicalError(ptr, `object of ${keys.length} members (at most ${MAX_ELEMENTS})`)
  }
  /** @type {Record<string, unknown>} */
  const out = {}
  for (const k of keys) {
    if (!k.isWellFormed()) {
      throw new CanonicalError(child(ptr, k), 'key holds a lone UTF-16 surrogate, which is not text')
    }
    // defineProperty, so a "__proto__" key is a key and not a prototype.
    Object.defineProperty(out, k, {
      value: normalize(/** @type {Record<string, unknown>} */ (value)[k], child(ptr, k), depth + 1),
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  return out
}

// cde: core deterministic encoding (sorted keys, shortest heads and
// floats). Everything else (-0, undefined, big integers) normalize has
// already settled.
const cborOptions = Object.freeze({ cde: true })

/**
 * The canonical CBOR bytes of value (see the module comment for the values
 * it takes).
 * @param {unknown} value
 * @returns {Uint8Array}
 */
export function encodeCanonical (value) {
  return encode(normalize(value), cborOptions)
}

// ---- JSON, read as the daemon reads a receipt's "payload" ----

/** Number literals longer than this are refused (the daemon's limit). */
const MAX_NUMBER_LEN = 400
const MAX_EXP_LITERAL = 1000
const MAX_EXP10 = 308
const MIN_EXP10 = -320

/**
 * The value of a JSON number literal under the daemon's rules
 * (schemas.canonicalNumber): an integral value in [-2^64, 2^64-1] is an
 * integer however it is written (1.0, 1e0, 10e-1 and 1 are the same);
 * anything else is the nearest float64, which is again an integer when it
 * is integral and in range. Magnitudes of 10^309 and above, non-zero ones
 * below 10^-320 and exponents written beyond ±1000 are refused.
 * @param {string} s a literal matching JSON's number grammar
 * @param {string} ptr
 * @returns {number | bigint}
 */
export function numberFromLiteral (s, ptr = '') {
  if (s.length > MAX_NUMBER_LEN) {
    throw new CanonicalError(ptr, `number literal longer than ${MAX_NUMBER_LEN} characters`)
  }
  const m = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/.exec(s)
  if (m === null) {
    throw new CanonicalError(ptr, `malformed number ${JSON.stringify(s)}`)
  }
  const [, sign, intPart, frac = '', expSign, expDigits = ''] = m
  let exp = 0
  for (const d of expDigits) {
    if (exp < 1e6) {
      exp = exp * 10 + Number(d)
    }
  }
  if (exp > MAX_EXP_LITERAL) {
    throw new CanonicalError(ptr, `number ${s} is out of range (exponent beyond ±${MAX_EXP_LITERAL})`)
  }
  if (expSign === '-') {
    exp = -exp
  }
  let digits = (intPart + frac).replace(/^0+/, '')
  exp -= frac.length
  const n = digits.length
  digits = digits.replace(/0+$/, '')
  exp += n - digits.length
  if (digits === '') {
    return 0
  }
  const top = exp + digits.length - 1
  if (top > MAX_EXP10 || top < MIN_EXP10) {
    throw new CanonicalError(ptr, `number ${s} is out of range`)
  }
  if (exp >= 0 && digits.length + exp <= 20) {
    let b = BigInt(digits + '0'.repeat(exp))
    if (sign === '-') {
      b = -b
    }
    if (b >= NEG_MIN && b <= U64_MAX) {
      const asNumber = Number(b)
      return Number.isSafeInteger(asNumber) ? asNumber : b
    }
  }
  const f = Number(s) // correctly rounded, as Go's strconv.ParseFloat
  if (!Number.isFinite(f)) {
    throw new CanonicalError(ptr, `number ${s} is out of float64 range`)
  }
  return canonicalNumber(f, ptr)
}

/**
 * parseJSON reads one JSON value strictly, as the daemon does: duplicate
 * keys, trailing content, nesting beyond 64 and invalid UTF-8 (when given
 * bytes) are errors; numbers follow numberFromLiteral, so integers keep
 * every digit (as bigints beyond 2^53); a lone surrogate escape becomes
 * U+FFFD, as Go's decoder makes it. Errors are CanonicalErrors naming the
 * pointer and the offset.
 * @param {string | Uint8Array} input
 * @returns {unknown}
 */
export function parseJSON (input) {
  let text
  if (typeof input === 'string') {
    text = input
  } else {
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input)
    } catch {
      throw new CanonicalError('', 'input is not valid UTF-8')
    }
  }
  return new JSONReader(text).document()
}

/**
 * The canonical CBOR the daemon makes of a receipt's "payload" JSON
 * (receipts.PayloadFromJSON in Go).
 * @param {string | Uint8Array} json
 * @returns {Uint8Array}
 */
export function payloadFromJSON (json) {
  return encodeCanonical(parseJSON(json))
}

class JSONReader {
  /** @param {string} text */
  constructor (text) {
    this.s = text
    this.i = 0
  }

  document () {
    const v = this.value('', 0)
    this.space()
    if (this.i !== this.s.length) {
      this.fail('', 'unexpected content after the value')
    }
    return v
  }

  /** @param {string} ptr @param {string} msg @returns {never} */
  fail (ptr, msg) {
    throw new CanonicalError(ptr, `${msg} (at offset ${this.i})`)
  }

  space () {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i)
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) {
        break
      }
      this.i++
    }
  }

  /** @param {string} ptr @param {number} depth @returns {unknown} */
  value (ptr, depth) {
    this.space()
    const c = this.s[this.i]
    if (c === '{' || c === '[') {
      if (depth >= MAX_DEPTH) {
        this.fail(ptr, `nested deeper than ${MAX_DEPTH} arrays and objects`)
      }
      return c === '{' ? this.object(ptr, depth) : this.array(ptr, depth)
    }
    if (c === '"') {
      return this.string(ptr)
    }
    for (const [word, v] of /** @type {const} */ ([['true', true], ['false', false], ['null', null]])) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length
        return v
      }
    }
    const m = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
    m.lastIndex = this.i
    const lit = m.exec(this.s)
    if (lit === null) {
      this.fail(ptr, c === undefined ? 'unexpected end of input' : `unexpected character ${JSON.stringify(c)}`)
    }
    this.i += lit[0].length
    const next = this.s[this.i]
    if (next !== undefined && /[0-9.eE+-]/.test(next)) {
      this.fail(ptr, `malformed number ${JSON.stringify(lit[0] + next)}`)
    }
    return numberFromLiteral(lit[0], ptr)
  }

  /** @param {string} ptr @returns {string} */
  string (ptr) {
    const start = this.i
    this.i++
    for (;;) {
      const c = this.s.charCodeAt(this.i)
      if (Number.isNaN(c)) {
        this.fail(ptr, 'unterminated string')
      }
      if (c < 0x20) {
        this.fail(ptr, 'control character in a string (escape it)')
      }
      this.i++
      if (c === 0x22) {
        break
      }
      if (c === 0x5c) {
        this.i++ // the escaped character; JSON.parse below checks the escape
      }
    }
    let s
    try {
      s = JSON.parse(this.s.slice(start, this.i))
    } catch (e) {
      this.fail(ptr, `bad string: ${/** @type {Error} */ (e).message}`)
    }
    return s.toWellFormed()
  }

  /** @param {string} ptr @param {number} depth */
  array (ptr, depth) {
    this.i++
    const out = []
    this.space()
    if (this.s[this.i] === ']') {
      this.i++
      return out
    }
    for (;;) {
      if (out.length >= MAX_ELEMENTS) {
        this.fail(ptr, `array of more than ${MAX_ELEMENTS} elements`)
      }
      out.push(this.value(child(ptr, out.length), depth + 1))
      this.space()
      const c = this.s[this.i++]
      if (c === ']') {
        return out
      }
      if (c !== ',') {
        this.i--
        this.fail(ptr, "expected ',' or ']' in an array")
      }
    }
  }

  /** @param {string} ptr @param {number} depth */
  object (ptr, depth) {
    this.i++
    /** @type {Record<string, unknown>} */
    const out = {}
    const seen = new Set()
    this.space()
    if (this.s[this.i] === '}') {
      this.i++
      return out
    }
    for (;;) {
      this.space()
      if (this.s[this.i] !== '"') {
        this.fail(ptr, 'expected a string key in an object')
      }
      const key = this.string(ptr)
      if (seen.has(key)) {
        this.fail(child(ptr, key), `duplicate object key ${JSON.stringify(key)}`)
      }
      if (seen.size >= MAX_ELEMENTS) {
        this.fail(ptr, `object of more than ${MAX_ELEMENTS} members`)
      }
      seen.add(key)
      this.space()
      if (this.s[this.i++] !== ':') {
        this.i--
        this.fail(child(ptr, key), "expected ':' after an object key")
      }
      const v = this.value(child(ptr, key), depth + 1)
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true })
      this.space()
      const c = this.s[this.i++]
      if (c === '}') {
        return out
      }
      if (c !== ',') {
        this.i--
        this.fail(ptr, "expected ',' or '}' in an object")
      }
    }
  }
}
