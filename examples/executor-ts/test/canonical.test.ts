// What the canonical encoder and the JSON reader accept and refuse beyond
// the vectors: every refusal is a CanonicalError naming where.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CanonicalError, MAX_DEPTH, encodeCanonical, numberFromLiteral, parseJSON, payloadFromJSON } from '../lib/canonical.js'

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex')

function refuses (fn: () => unknown, pointer: string, msg: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof CanonicalError, `not a CanonicalError: ${e}`)
    assert.equal(e.pointer, pointer)
    assert.match(e.message, msg)
    return true
  })
}

test('numbers follow the integer rule', () => {
  assert.equal(hex(encodeCanonical(-0)), '00')
  assert.equal(hex(encodeCanonical(1.0)), '01')
  assert.equal(hex(encodeCanonical(2 ** 53)), '1b0020000000000000')
  assert.equal(hex(encodeCanonical(1e19)), '1b8ac7230489e80000', 'an integral double beyond 2^53 is an integer')
  assert.equal(hex(encodeCanonical(-(2 ** 64))), '3bffffffffffffffff', 'down to -2^64')
  assert.equal(hex(encodeCanonical(2 ** 64)), 'fa5f800000', 'beyond the integer range it is a float')
  assert.equal(hex(encodeCanonical(18446744073709551615n)), '1bffffffffffffffff')
  assert.equal(hex(encodeCanonical(3 * 2 ** -24)), 'f90003', 'a half-precision subnormal is written in 2 bytes')
  assert.equal(hex(encodeCanonical(0.1)), 'fb3fb999999999999a')
})

test('maps sort by encoded key, and keys are only keys', () => {
  assert.equal(hex(encodeCanonical({ b: 1, aa: 2, a: 3 })), 'a3616103616201626161' + '02')
  const withProto = parseJSON('{"__proto__": 1}')
  assert.ok(typeof withProto === 'object' && withProto !== null)
  assert.deepEqual(Object.keys(withProto), ['__proto__'])
  assert.equal(hex(encodeCanonical(withProto)), 'a1695f5f70726f746f5f5f01')
  assert.equal(Object.getPrototypeOf(withProto), Object.prototype)
})

test('bytes are byte strings, whatever Uint8Array they come in', () => {
  assert.equal(hex(encodeCanonical(Buffer.from([1, 2]))), '420102')
  assert.equal(hex(encodeCanonical(new Uint8Array([1, 2]))), '420102')
})

test('values without a canonical form are refused, naming where', () => {
  refuses(() => encodeCanonical({ a: [1, NaN] }), '/a/1', /NaN/)
  refuses(() => encodeCanonical(Infinity), '', /Infinity/)
  refuses(() => encodeCanonical({ a: undefined }), '/a', /undefined/)
  refuses(() => encodeCanonical([undefined]), '/0', /undefined/)
  refuses(() => encodeCanonical(1n << 64n), '', /outside the CBOR integer range/)
  refuses(() => encodeCanonical(-(1n << 64n) - 1n), '', /outside the CBOR integer range/)
  refuses(() => encodeCanonical({ s: 'a\ud800' }), '/s', /lone UTF-16 surrogate/)
  refuses(() => encodeCanonical({ ['k\udc00']: 1 }), '/k\udc00', /lone UTF-16 surrogate/)
  refuses(() => encodeCanonical({ m: new Map() }), '/m', /Map has no canonical form/)
  refuses(() => encodeCanonical({ d: new Date(0) }), '/d', /Date has no canonical form/)
  refuses(() => encodeCanonical({ f: () => 1 }), '/f', /function/)
  refuses(() => encodeCanonical({ [Symbol('x')]: 1 }), '', /symbol keys/)
  refuses(() => encodeCanonical(new Float64Array(1)), '', /Float64Array/)
  // eslint-disable-next-line no-sparse-arrays
  refuses(() => encodeCanonical([1, , 3]), '/1', /sparse/)
  refuses(() => encodeCanonical({ 'a/b': { 'c~d': NaN } }), '/a~1b/c~0d', /NaN/)
  let deep: unknown = 0
  for (let i = 0; i < MAX_DEPTH; i++) deep = [deep]
  encodeCanonical(deep)
  refuses(() => encodeCanonical([deep]), '/0'.repeat(MAX_DEPTH), /deeper than 64/)
})

test('JSON is read strictly, errors name the pointer', () => {
  refuses(() => parseJSON('{"a": {"b": 1, "b": 2}}'), '/a/b', /duplicate object key "b"/)
  refuses(() => parseJSON('{"a": [1, 2,]}'), '/a/2', /unexpected character/)
  refuses(() => parseJSON('[1] x'), '', /after the value/)
  refuses(() => parseJSON('{"a": 1e400}'), '/a', /out of range/)
  refuses(() => parseJSON('[01]'), '/0', /malformed number/)
  refuses(() => parseJSON('"a\u0001"'), '', /control character/)
  refuses(() => parseJSON(new Uint8Array([0x22, 0xc3, 0x22])), '', /not valid UTF-8/)
  assert.equal(parseJSON('9007199254740993'), 9007199254740993n, 'integers keep every digit')
  assert.equal(parseJSON('9007199254740991'), 9007199254740991)
  assert.equal(parseJSON(' -0.0 '), 0)
  refuses(() => parseJSON('{"k": ["\\ud800x"]}'), '/k/0', /lone UTF-16 surrogate/)
  refuses(() => parseJSON('"\\ud83d\\u0041"'), '', /lone UTF-16 surrogate/)
  assert.equal(parseJSON('"\\ud83d\\ude00"'), '\u{1F600}', 'a surrogate pair escape is one character')
})

test('number literals: the same value however written', () => {
  for (const lit of ['15', '15.0', '1.5e1', '150e-1', '0.15E+2']) {
    assert.equal(numberFromLiteral(lit), 15, lit)
  }
  assert.equal(numberFromLiteral('1e19'), 10n ** 19n)
  assert.equal(numberFromLiteral('0.5'), 0.5)
  assert.equal(hex(payloadFromJSON('{"n": 1.0}')), hex(payloadFromJSON('{"n":1}')))
})
