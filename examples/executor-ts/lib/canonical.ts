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
 * docs/receipt-vectors.json the bytes (test/vectors.test.ts checks them).
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

/**
 * A value as the daemon's JSON reader gives it: JSON's values, with
 * integers beyond 2^53 as bigints (parseJSON).
 */
export type JSONValue = null | boolean | number | bigint | string | JSONValue[] | { [key: string]: JSONValue }

/**
 * A value with a canonical form: a JSONValue, or a byte string (a CBOR byte
 * string, which JSON has no way to write). normalize returns one.
 */
export type Value = null | boolean | number | bigint | string | Uint8Array | Value[] | { [key: string]: Value }

/** Nesting limit of arrays and maps: the daemon's (schemas maxDepth). */
export const MAX_DEPTH = 64
/** Elements of one array or members of one map: the daemon's decoder limit. */
export const MAX_ELEMENTS = 1 << 20

const U64_MAX = (1n << 64n) - 1n
const NEG_MIN = -(1n << 64n)

/** A value that has no canonical form, or JSON the daemon would refuse. */
export class CanonicalError extends Error {
  /** JSON pointer of the offending value ("" is the whole value). */
  readonly pointer: string

  constructor (pointer: string, message: string) {
    super(`${pointer === '' ? '/' : pointer}: ${message}`)
    this.name = 'CanonicalError'
    this.pointer = pointer
  }
}

function child (ptr: string, key: string | number): string {
  return ptr + '/' + String(key).replaceAll('~', '~0').replaceAll('/', '~1')
}

/**
 * The canonical stand-in for a number: integral values in the CBOR integer
 * range become integers (a bigint beyond 2^53), -0 becomes 0, other finite
 * values stay floats.
 */
function canonicalNumber (x: number, ptr: string): number | bigint {
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
 * canonically. It never modifies value. It takes unknown, not Value: what
 * a caller's types let through (a Date in an object typed loosely, a class
 * instance) is refused here, at run time, naming where.
 */
export function normalize (value: unknown, ptr = '', depth = 0): Value {
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
    const out: Value[] = new Array<Value>(value.length)
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) {
        throw new CanonicalError(child(ptr, i), 'hole in a sparse array')
      }
      out[i] = normalize(value[i], child(ptr, i), depth + 1)
    }
    return out
  }
  const proto: unknown = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) {
    const name = constructorName(proto)
    throw new CanonicalError(ptr, `a ${name} has no canonical form (use a plain object, an array or a Uint8Array)`)
  }
  if (Object.getOwnPropertySymbols(value).length > 0) {
    throw new CanonicalError(ptr, 'object has symbol keys; map keys are strings')
  }
  const keys = Object.keys(value)
  if (keys.length > MAX_ELEMENTS) {
    throw new CanonicalError(ptr, `object of ${keys.length} members (at most ${MAX_ELEMENTS})`)
  }
  const members = value as Record<string, unknown>
  const out: { [key: string]: Value } = {}
  for (const k of keys) {
    if (!k.isWellFormed()) {
      throw new CanonicalError(child(ptr, k), 'key holds a lone UTF-16 surrogate, which is not text')
    }
    // defineProperty, so a "__proto__" key is a key and not a prototype.
    Object.defineProperty(out, k, {
      value: normalize(members[k], child(ptr, k), depth + 1),
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  return out
}

/** The name of a prototype's constructor, for errors ("Map", "Date"). */
function constructorName (proto: unknown): string {
  if (typeof proto === 'object' && proto !== null && 'constructor' in proto) {
    const c: unknown = proto.constructor
    if (typeof c === 'function' && c.name !== '') {
      return c.name
    }
  }
  return 'object'
}

// cde: core deterministic encoding (sorted keys, shortest heads and
// floats). Everything else (-0, undefined, big integers) normalize has
// already settled.
const cborOptions = Object.freeze({ cde: true })

/**
 * The canonical CBOR bytes of value (see the module comment for the values
 * it takes).
 */
export function encodeCanonical (value: unknown): Uint8Array {
  return encode(normalize(value), cborOptions)
}

// ---- JSON, read as the daemon reads a receipt's "payload" ----

/** The member name of v when v is a JSON object holding it, else undefined. */
export function member (v: JSONValue | undefined, name: string): JSONValue | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, name)) {
    return undefined
  }
  return v[name]
}

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
 * s is a literal matching JSON's number grammar.
 */
export function numberFromLiteral (s: string, ptr = ''): number | bigint {
  if (s.length > MAX_NUMBER_LEN) {
    throw new CanonicalError(ptr, `number literal longer than ${MAX_NUMBER_LEN} characters`)
  }
  const m = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/.exec(s)
  if (m === null) {
    throw new CanonicalError(ptr, `malformed number ${JSON.stringify(s)}`)
  }
  const [, sign = '', intPart = '', frac = '', expSign = '', expDigits = ''] = m
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
 * every digit (as bigints beyond 2^53); a lone surrogate escape is
 * refused, as the daemon refuses it. Errors are CanonicalErrors naming the
 * pointer and the offset.
 */
export function parseJSON (input: string | Uint8Array): JSONValue {
  let text: string
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
 */
export function payloadFromJSON (json: string | Uint8Array): Uint8Array {
  return encodeCanonical(parseJSON(json))
}

class JSONReader {
  private readonly s: string
  private i = 0

  constructor (text: string) {
    this.s = text
  }

  document (): JSONValue {
    const v = this.value('', 0)
    this.space()
    if (this.i !== this.s.length) {
      this.fail('', 'unexpected content after the value')
    }
    return v
  }

  private fail (ptr: string, msg: string): never {
    throw new CanonicalError(ptr, `${msg} (at offset ${this.i})`)
  }

  private space (): void {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i)
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) {
        break
      }
      this.i++
    }
  }

  private value (ptr: string, depth: number): JSONValue {
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
    for (const [word, v] of [['true', true], ['false', false], ['null', null]] as const) {
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

  private string (ptr: string): string {
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
    let s: unknown
    try {
      s = JSON.parse(this.s.slice(start, this.i))
    } catch (e) {
      this.fail(ptr, `bad string: ${e instanceof Error ? e.message : String(e)}`)
    }
    if (typeof s !== 'string') {
      this.fail(ptr, 'bad string')
    }
    if (!s.isWellFormed()) {
      // JSON.parse reads "\ud800" as a lone surrogate, Go's encoding/json as
      // U+FFFD; the daemon refuses it, since it is no text.
      this.fail(ptr, 'lone UTF-16 surrogate escape in a string (a surrogate escape must be a pair)')
    }
    return s
  }

  private array (ptr: string, depth: number): JSONValue[] {
    this.i++
    const out: JSONValue[] = []
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

  private object (ptr: string, depth: number): { [key: string]: JSONValue } {
    this.i++
    const out: { [key: string]: JSONValue } = {}
    const seen = new Set<string>()
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
