// Receipt and frame fields the daemon would refuse are refused before
// signing; key files are made and read as aosd makes and reads them.
import { test } from 'node:test'
import type { KeyObject } from 'node:crypto'
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeCanonical, member, parseJSON } from '../lib/canonical.js'
import { type Receipt, MalformedError, createKeyFiles, frameBody, keyId, readPrivateKeyFile, receiptBody, signReceipt } from '../lib/receipts.js'

const good: Receipt = {
  world: 'world:5f0c2a9b8e7d6c5b4a39281706f5e4d3',
  intentHash: 'sha256:' + 'ab'.repeat(32),
  effect: 'com.example/payment.charge@1',
  executor: 'payments',
  status: 'ok',
  attempt: 1,
  payload: encodeCanonical({ charge_id: 'c', status: 'succeeded' })
}

test('receipt fields the daemon refuses are refused here', () => {
  // Receipts as a JavaScript caller or parsed JSON could make them: the
  // types keep a TypeScript caller from most, the run-time checks refuse
  // them all.
  const bad: Record<string, Record<string, unknown>> = {
    'intent hash without prefix': { intentHash: 'ab'.repeat(32) },
    'upper-case intent hash': { intentHash: 'sha256:' + 'AB'.repeat(32) },
    'short intent hash': { intentHash: 'sha256:abcd' },
    'unknown status': { status: 'done' },
    'empty effect': { effect: '' },
    'effect with a space': { effect: 'com.example/pay charge@1' },
    'executor with a control character': { executor: 'pay\u0007' },
    'executor with U+FFFD': { executor: 'pay\ufffd' },
    'executor of 257 bytes': { executor: 'ü'.repeat(128) + 'x' },
    'issuer_ref with a space': { issuerRef: 'a b' },
    'no world (the v1 layout, which worlds refuse)': { world: '' },
    'world missing': { world: undefined },
    'world with a space': { world: 'world: x' },
    'negative attempt': { attempt: -1 },
    'fractional attempt': { attempt: 1.5 },
    'attempt beyond 2^64-1': { attempt: 1n << 64n },
    'unsafe number attempt': { attempt: 2 ** 60 },
    'no payload': { payload: undefined },
    'empty payload': { payload: new Uint8Array() },
    'payload as a value': { payload: { charge_id: 'c' } }
  }
  for (const [name, change] of Object.entries(bad)) {
    const r = { ...good, ...change } as unknown as Receipt // deliberately ill-typed
    assert.throws(() => receiptBody(r), MalformedError, name)
  }
  assert.equal(Buffer.byteLength('ü'.repeat(128)), 256)
  receiptBody({ ...good, executor: 'ü'.repeat(128) }) // 256 bytes is the limit, inclusive
  receiptBody({ ...good, attempt: (1n << 64n) - 1n })
  receiptBody({ ...good, attempt: 0 })
})

test('frame seq starts at 1', () => {
  const f = { world: good.world, intentHash: good.intentHash, effect: good.effect, executor: good.executor, payload: good.payload }
  assert.throws(() => frameBody({ ...f, seq: 0 }), MalformedError)
  assert.throws(() => frameBody({ ...f, seq: 1, world: '' }), MalformedError)
  frameBody({ ...f, seq: 1 })
})

test('the world is in the body and the HTTP form', () => {
  assert.ok(Buffer.from(receiptBody(good)).includes(good.world))
  assert.equal(member(parseJSON(signReceipt(createKey(), good).json), 'world'), good.world)
})

test('issuer_ref is in the body only when given', () => {
  assert.ok(!Buffer.from(receiptBody(good)).includes('issuer_ref'))
  assert.ok(!Buffer.from(receiptBody({ ...good, issuerRef: '' })).includes('issuer_ref'))
  assert.ok(Buffer.from(receiptBody({ ...good, issuerRef: 'r' })).includes('issuer_ref'))
  assert.equal(member(parseJSON(signReceipt(createKey(), { ...good, issuerRef: 'r' }).json), 'issuer_ref'), 'r')
  assert.equal(member(parseJSON(signReceipt(createKey(), good).json), 'issuer_ref'), undefined)
})

let n = 0
function createKey (): KeyObject {
  const dir = mkdtempSync(join(tmpdir(), 'aos-exec-'))
  return createKeyFiles(join(dir, `k${n++}.key`))
}

test('key files: 0600, never overwritten, group-readable keys refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aos-exec-'))
  const path = join(dir, 'payments.key')
  const key = createKeyFiles(path)
  for (const p of [path, path + '.pub.pem']) {
    assert.equal(statSync(p).mode & 0o777, 0o600, p)
  }
  assert.match(readFileSync(path, 'utf8'), /^-----BEGIN PRIVATE KEY-----\n/)
  assert.match(readFileSync(path + '.pub.pem', 'utf8'), /^-----BEGIN PUBLIC KEY-----\n/)
  assert.equal(keyId(readPrivateKeyFile(path)), keyId(key))
  const before = readFileSync(path)
  assert.throws(() => createKeyFiles(path), { code: 'EEXIST' })
  assert.deepEqual(readFileSync(path), before)
  chmodSync(path, 0o640)
  assert.throws(() => readPrivateKeyFile(path), /accessible to group or others \(mode 640\)/)
  const rsa = join(dir, 'notes.txt')
  writeFileSync(rsa, 'not a key', { mode: 0o600 })
  assert.throws(() => readPrivateKeyFile(rsa))
})
