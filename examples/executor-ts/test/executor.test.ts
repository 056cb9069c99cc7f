// The executor against a scripted daemon on loopback: the answers a real
// daemon gives only under faults (5xx, lost connections, duplicates,
// refusals) are scripted here; cmd/aosd/executor_ts_e2e_test.go runs the
// executor against the real daemon. Every receipt and frame posted is
// checked against the executor's public key.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type KeyObject, createPublicKey } from 'node:crypto'
import { type JSONValue, type Value, member, parseJSON } from '../lib/canonical.js'
import { Daemon } from '../lib/daemon.js'
import { type Intent, type Perform, type Work, Executor, backoffMs, parseIntent, retryPolicy } from '../lib/executor.js'
import { CHARGE_EFFECT, standInPayments } from '../lib/payments.js'
import { createKeyFiles, frameBody, keyId, receiptBody, verifySignature } from '../lib/receipts.js'
import { decode } from 'cbor2'

const TOKEN = 'test-token'
/** The scripted daemon's world identity, which every receipt and frame must name. */
const WORLD = 'world:5f0c2a9b8e7d6c5b4a39281706f5e4d3'

/** An answer of the scripted daemon: a status and a body (JSON text, or a value to stringify), or 'hang' to hold the request open (a long poll). */
type Answer = { status: number, body: string | Record<string, unknown> } | 'hang'
type Scripted = Answer | ((body: string, req: IncomingMessage, res: ServerResponse) => Answer | Promise<Answer>)
/** A request as the daemon's answers read it: a JSON object. */
type Posted = Record<string, JSONValue>

/**
 * A scripted daemon: each path has a queue of answers ({status, body}
 * objects, or functions of the request); the last answer repeats.
 */
async function fakeDaemon (script: Record<string, Scripted[]>) {
  const requests: Array<{ path: string, body: string, auth: string | undefined }> = []
  const arrived = new EventEmitter()
  const server = createServer(async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    requests.push({ path: req.url ?? '', body, auth: req.headers.authorization })
    arrived.emit('request')
    const queue: Scripted[] = script[req.url ?? ''] ?? [{ status: 404, body: { error: { code: 'not_found', message: 'no such route' } } }]
    const next = queue.length > 1 ? queue.shift() : queue[0]
    assert.ok(next !== undefined, 'an empty script')
    const answer = typeof next === 'function' ? await next(body, req, res) : next
    if (answer === 'hang') return // hold the request open (a long poll)
    res.writeHead(answer.status, { 'content-type': 'application/json' })
    res.end(typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const addr = server.address() as AddressInfo // listening on TCP, not a pipe
  return {
    url: `http://127.0.0.1:${addr.port}`,
    addr: `127.0.0.1:${addr.port}`,
    requests,
    posted: (path: string): Posted[] => requests.filter((r) => r.path === path).map((r) => asObject(parseJSON(r.body))),
    /** Resolves once n requests for path have arrived. */
    async waitFor (path: string, n: number): Promise<void> {
      while (requests.filter((r) => r.path === path).length < n) await once(arrived, 'request')
    },
    close: () => { server.closeAllConnections(); server.close() }
  }
}

/** A JSON object, asserted to be one. */
function asObject (v: JSONValue | undefined): Posted {
  assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), `not a JSON object: ${String(v)}`)
  return v
}

/** A string member, asserted to be one. */
function str (r: Posted, name: string): string {
  const v = r[name]
  assert.equal(typeof v, 'string', `${name}: ${String(v)}`)
  return String(v)
}

/** An integer member, asserted to be one. */
function uint (r: Posted, name: string): number | bigint {
  const v = r[name]
  assert.ok(typeof v === 'number' || typeof v === 'bigint', `${name}: ${String(v)}`)
  return v
}

/** The first of a list, asserted to be there. */
function first<T> (xs: T[]): T {
  const x = xs[0]
  assert.ok(x !== undefined, 'an empty list')
  return x
}

function newKey (): { key: KeyObject, path: string, dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'aos-exec-'))
  const path = join(dir, 'payments.key')
  return { key: createKeyFiles(path), path, dir }
}

/** Checks a posted receipt's signature and returns its payload value. */
function verifiedReceipt (key: KeyObject, r: Posted): unknown {
  const status = str(r, 'status')
  assert.ok(status === 'ok' || status === 'error' || status === 'timeout', status)
  const issuerRef = r['issuer_ref'] === undefined ? undefined : str(r, 'issuer_ref')
  assert.equal(r['world'], WORLD)
  const body = receiptBody({ world: str(r, 'world'), intentHash: str(r, 'intent_hash'), effect: str(r, 'effect'), executor: str(r, 'executor'), status, attempt: uint(r, 'attempt'), issuerRef, payload: Buffer.from(str(r, 'payload_cbor'), 'base64') })
  assert.equal(r['key_id'], keyId(key))
  assert.ok(verifySignature(createPublicKey(key), 'receipt', body, Buffer.from(str(r, 'signature'), 'base64')), 'receipt signature')
  return decode(Buffer.from(str(r, 'payload_cbor'), 'base64'))
}

function verifiedFrame (key: KeyObject, f: Posted): unknown {
  assert.equal(f['world'], WORLD)
  const body = frameBody({ world: str(f, 'world'), intentHash: str(f, 'intent_hash'), effect: str(f, 'effect'), seq: uint(f, 'seq'), executor: str(f, 'executor'), payload: Buffer.from(str(f, 'payload_cbor'), 'base64') })
  assert.ok(verifySignature(createPublicKey(key), 'frame', body, Buffer.from(str(f, 'signature'), 'base64')), 'frame signature')
  return decode(Buffer.from(str(f, 'payload_cbor'), 'base64'))
}

const hashOf = (i: number): string => 'sha256:' + i.toString(16).padStart(2, '0').repeat(32)
/** A claimed intent's JSON (params and retry are JSON text). */
const intentJSON = (i: number, params: string, retry?: string): string =>
  `{"hash":"${hashOf(i)}","effect":"${CHARGE_EFFECT}","params":${params},"params_cbor":"","origin_workflow":"com.example/order.step@1",` +
  `"origin_key":"o${i}","emitted_at":${i},"lease_until":"2030-01-01T00:00:00Z"${retry ? ',"retry":' + retry : ''}}`
const claimJSON = (intents: string[]): string => `{"intents":[${intents.join(',')}],"world":"${WORLD}"}`
/** A claimed intent, read as the executor reads a claim's answer. */
const intentOf = (i: number, params: string): Intent => parseIntent(parseJSON(intentJSON(i, params)), 0, WORLD)
const fastRetry = '{"max_attempts":3,"initial_backoff_ms":1,"max_backoff_ms":2}'

function executorFor (url: string, key: KeyObject, perform: Perform, lines: string[] = []): Executor {
  return new Executor({ daemon: new Daemon({ url, token: TOKEN }), key, name: 'payments', effect: CHARGE_EFFECT, perform, log: (l) => lines.push(l), waitMs: 0 })
}

test('backoff doubles up to the cap, as the built-in executors wait', () => {
  const p = { max_attempts: 9, initial_backoff_ms: 200, max_backoff_ms: 1000 }
  assert.deepEqual([1, 2, 3, 4, 5].map((a) => backoffMs(p, a)), [200, 400, 800, 1000, 1000])
  assert.equal(retryPolicy(undefined).max_attempts, 3)
  assert.throws(() => retryPolicy({ max_attempts: 'x' }), /malformed retry policy/)
})

test('a claim is settled: signed receipts, exact amounts, the claim\'s retry policy, a frame per retry', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: claimJSON([
      intentJSON(1, '{"order_id":"o1","amount_cents":900,"customer":"Zoë 😀"}', fastRetry),
      // Beyond 2^53: JSON.parse would round it to the limit and approve it.
      intentJSON(2, '{"order_id":"o2","amount_cents":9007199254740993,"customer":"big"}', fastRetry)
    ]) }],
    '/v1/frames': [{ status: 200, body: { seq: 10 } }],
    '/v1/receipts': [{ status: 200, body: { seq: 11 } }]
  })
  try {
    const ex = executorFor(d.url, key, standInPayments({ declineOver: 9007199254740992n, failAttempts: 1 }))
    assert.equal(await ex.serveBatch(), 2)
    assert.ok(d.requests.every((r) => r.auth === 'Bearer ' + TOKEN))
    const claim = d.posted('/v1/effects/claim')[0]
    assert.deepEqual(claim, { executor: 'payments', effects: [CHARGE_EFFECT], max: 16, lease_ms: 30000, wait_ms: 0 })
    const receipts = d.posted('/v1/receipts').sort((a, b) => str(a, 'intent_hash').localeCompare(str(b, 'intent_hash')))
    assert.equal(receipts.length, 2)
    assert.deepEqual(receipts.map((r) => [r['status'], r['attempt'], r['executor'], r['effect']]), [['ok', 2, 'payments', CHARGE_EFFECT], ['ok', 2, 'payments', CHARGE_EFFECT]])
    assert.deepEqual(verifiedReceipt(key, first(receipts)), { charge_id: 'ch_' + '01'.repeat(6), status: 'succeeded' })
    assert.deepEqual(verifiedReceipt(key, first(receipts.slice(1))), { charge_id: 'ch_' + '02'.repeat(6), status: 'declined' })
    const frames = d.posted('/v1/frames')
    assert.equal(frames.length, 2)
    for (const f of frames) {
      assert.equal(f['seq'], 1)
      assert.deepEqual(verifiedFrame(key, f), { attempt: 1, error: 'payment provider unavailable (simulated outage of 1 attempt(s))', retry_in_ms: 1 })
    }
  } finally {
    d.close()
  }
})

test('the intents of one claim run concurrently', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: claimJSON([1, 2, 3].map((i) => intentJSON(i, '{}'))) }],
    '/v1/receipts': [{ status: 200, body: { seq: 1 } }]
  })
  try {
    // Each piece of work yields between its start and its end: one after
    // another, the log would read s1 e1 s2 e2 s3 e3.
    const events: string[] = []
    const perform: Perform = async (it) => {
      events.push('s' + String(it.emitted_at))
      await new Promise((resolve) => setImmediate(resolve))
      events.push('e' + String(it.emitted_at))
      return { status: 'ok', payload: {}, summary: 'done' }
    }
    assert.equal(await executorFor(d.url, key, perform).serveBatch(), 3)
    assert.deepEqual(events, ['s1', 's2', 's3', 'e1', 'e2', 'e3'])
    assert.equal(d.posted('/v1/receipts').length, 3)
  } finally {
    d.close()
  }
})

test('retries spent: an error receipt after the policy\'s last attempt', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: claimJSON([intentJSON(3, '{"order_id":"o3","amount_cents":5,"customer":"c"}', fastRetry)]) }],
    '/v1/frames': [{ status: 200, body: { seq: 1 } }],
    '/v1/receipts': [{ status: 200, body: { seq: 2 } }]
  })
  try {
    await executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 10 })).serveBatch()
    assert.deepEqual(d.posted('/v1/frames').map((f) => f['seq']), [1, 2])
    const r = first(d.posted('/v1/receipts'))
    assert.equal(r['status'], 'error')
    assert.equal(r['attempt'], 3)
    assert.deepEqual(verifiedReceipt(key, r), { error: 'payment provider unavailable (simulated outage of 10 attempt(s))', attempts: 3 })
  } finally {
    d.close()
  }
})

test('params the executor cannot read: an error receipt at once, no retries', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: claimJSON([intentJSON(4, '{"order_id":"o4","amount_cents":"12","customer":"c"}', fastRetry)]) }],
    '/v1/receipts': [{ status: 200, body: { seq: 2 } }]
  })
  try {
    await executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 })).serveBatch()
    assert.equal(d.posted('/v1/frames').length, 0)
    const r = first(d.posted('/v1/receipts'))
    assert.equal(r['status'], 'error')
    assert.equal(r['attempt'], 1)
    assert.deepEqual(verifiedReceipt(key, r), { error: 'params: /amount_cents: want an integer of at least 1', attempts: 1 })
  } finally {
    d.close()
  }
})

test('posting a receipt: 5xx and lost answers are retried, 409 is done, 403 and 404 are not retried', async (t) => {
  const cases: Array<{ name: string, answers: Scripted[], outcome: string, posts: number, log?: RegExp }> = [
    { name: '503 twice, then taken', answers: [{ status: 503, body: { error: { code: 'unavailable', message: 'closing' } } }, { status: 503, body: '' }, { status: 200, body: { seq: 7 } }], outcome: 'settled', posts: 3 },
    { name: 'the connection drops, then taken', answers: [(_b, _q, res) => { res.destroy(); return 'hang' as const }, { status: 200, body: { seq: 7 } }], outcome: 'settled', posts: 2 },
    { name: 'duplicate', answers: [{ status: 409, body: { error: { code: 'duplicate', message: 'settled at seq 5' } } }], outcome: 'duplicate', posts: 1 },
    { name: 'dropped', answers: [{ status: 409, body: { error: { code: 'dropped', message: 'cell failed' } } }], outcome: 'dropped', posts: 1 },
    { name: 'untrusted', answers: [{ status: 403, body: { error: { code: 'untrusted', message: 'unknown signer' } } }], outcome: 'refused', posts: 1, log: /aosd keys add payments KEY.pub.pem --effects com.example\/payment.charge@1/ },
    { name: 'unknown intent', answers: [{ status: 404, body: { error: { code: 'unknown_intent', message: 'never issued' } } }], outcome: 'refused', posts: 1 },
    { name: 'wrong world', answers: [{ status: 403, body: { error: { code: 'wrong_world', message: 'receipt for intent x is signed for world:aa, but this world is world:bb' } } }], outcome: 'refused', posts: 1, log: /receipt refused: .*wrong_world: receipt for intent x is signed for world:aa, but this world is world:bb; left to its lease$/ },
    { name: 'rejected payload', answers: [{ status: 200, body: { seq: 9, rejected: 'payload does not validate' } }], outcome: 'rejected', posts: 1 }
  ]
  const { key } = newKey()
  for (const c of cases) {
    await t.test(c.name, async () => {
      const d = await fakeDaemon({ '/v1/receipts': c.answers })
      try {
        const lines: string[] = []
        const ex = executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 }), lines)
        assert.equal(await ex.settle(intentOf(5, '{"order_id":"o5","amount_cents":5,"customer":"c"}')), c.outcome)
        assert.equal(d.posted('/v1/receipts').length, c.posts)
        const log = c.log
        if (log) assert.ok(lines.some((l) => log.test(l)), lines.join('\n'))
      } finally {
        d.close()
      }
    })
  }
})

test('run: a failed claim is tried again, a wrong token ends it, abort stops it', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 500, body: { error: { code: 'internal', message: 'boom' } } }, { status: 401, body: { error: { code: 'unauthorized', message: 'bad token' } } }]
  })
  try {
    const lines: string[] = []
    const ex = executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 }), lines)
    await assert.rejects(ex.run(new AbortController().signal), { status: 401 })
    assert.equal(d.posted('/v1/effects/claim').length, 2)
    assert.match(first(lines), /HTTP 500 internal: boom \(trying again in 1 s\)/)
  } finally {
    d.close()
  }
  const hanging = await fakeDaemon({ '/v1/effects/claim': ['hang'] })
  try {
    const ex = executorFor(hanging.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 }))
    const stop = new AbortController()
    const running = ex.run(stop.signal)
    await hanging.waitFor('/v1/effects/claim', 1)
    stop.abort()
    await running // returns, does not throw
  } finally {
    hanging.close()
  }
})

test('the daemon address is read again after a failed connection (a restarted daemon has a new port)', async () => {
  const d = await fakeDaemon({ '/v1/effects/claim': [{ status: 200, body: { intents: [] } }] })
  const dead = await fakeDaemon({})
  dead.close()
  const world = mkdtempSync(join(tmpdir(), 'aos-world-'))
  writeFileSync(join(world, 'token'), TOKEN + '\n')
  writeFileSync(join(world, 'daemon.json'), JSON.stringify({ addr: dead.addr, pid: 1 }))
  try {
    const daemon = new Daemon({ world })
    await assert.rejects(daemon.post('/v1/effects/claim', '{}'), { name: 'UnreachableError' })
    writeFileSync(join(world, 'daemon.json'), JSON.stringify({ addr: d.addr, pid: 1 }))
    assert.deepEqual(await daemon.post('/v1/effects/claim', '{}'), { intents: [] })
    assert.equal(first(d.requests).auth, 'Bearer ' + TOKEN)
  } finally {
    d.close()
  }
  await assert.rejects(new Daemon({ world: join(world, 'none') }).post('/v1/x', '{}'), /no daemon for .*start `aosd serve/)
})

test('a daemon that stops answering does not hang the executor', async () => {
  const d = await fakeDaemon({ '/v1/effects/claim': ['hang'] })
  try {
    const daemon = new Daemon({ url: d.url, token: TOKEN, timeoutMs: 50 })
    await assert.rejects(daemon.post('/v1/effects/claim', '{}'), { name: 'UnreachableError' })
  } finally {
    d.close()
  }
})

test('work that throws something other than an Error still ends in an error receipt', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({ '/v1/receipts': [{ status: 200, body: { seq: 2 } }] })
  try {
    const ex = executorFor(d.url, key, async () => { throw 'provider said no' }) // eslint-disable-line no-throw-literal
    assert.equal(await ex.settle(intentOf(7, '{}')), 'settled')
    assert.deepEqual(verifiedReceipt(key, first(d.posted('/v1/receipts'))), { error: 'provider said no', attempts: 1 })
  } finally {
    d.close()
  }
})

test('a result with no canonical form settles as an error, not a lease that fails forever', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({ '/v1/receipts': [{ status: 200, body: { seq: 2 } }] })
  try {
    // What code that escaped the types (JavaScript calling in, a cast) can
    // hand over: a Date is no Value.
    const payload = { charge_id: 'c', at: new Date(0) } as unknown as Value
    const ex = executorFor(d.url, key, async (): Promise<Work> => ({ status: 'ok', payload, summary: 'x' }))
    assert.equal(await ex.settle(intentOf(8, '{}')), 'settled')
    const r = first(d.posted('/v1/receipts'))
    assert.equal(r['status'], 'error')
    assert.deepEqual(verifiedReceipt(key, r), { error: "the executor's receipt payload has no canonical form: /at: a Date has no canonical form (use a plain object, an array or a Uint8Array)", attempts: 1 })
  } finally {
    d.close()
  }
})

test('a claimed intent the executor cannot read is left to its lease; the others are settled', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: claimJSON([
      '{"effect":"com.example/payment.charge@1","params":{}}',
      intentJSON(9, '{"order_id":"o9","amount_cents":5,"customer":"c"}')
    ]) }],
    '/v1/receipts': [{ status: 200, body: { seq: 4 } }]
  })
  try {
    const lines: string[] = []
    assert.equal(await executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 }), lines).serveBatch(), 2)
    const receipts = d.posted('/v1/receipts')
    assert.deepEqual(receipts.map((r) => r['intent_hash']), [hashOf(9)])
    assert.ok(lines.some((l) => l === 'claim answer: intents/0/hash: want a string; left to its lease'), lines.join('\n'))
  } finally {
    d.close()
  }
  assert.throws(() => parseIntent(parseJSON(intentJSON(1, '{}').replace('"emitted_at":1', '"emitted_at":-1')), 3, WORLD), /intents\/3\/emitted_at/)
  assert.throws(() => parseIntent(parseJSON('[]'), 0, WORLD), /intents\/0\/hash/)
  assert.equal(parseIntent(parseJSON(intentJSON(1, '{}', fastRetry)), 0, WORLD).retry !== undefined, true)
})

test('a claim answer without the world\'s identity (a daemon from before identities) settles nothing', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: `{"intents":[${intentJSON(7, '{"order_id":"o7","amount_cents":5,"customer":"c"}')}]}` }],
    '/v1/receipts': [{ status: 200, body: { seq: 4 } }]
  })
  try {
    await assert.rejects(executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 })).serveBatch(),
      /claim answer without the world's identity \("world"\): the daemon predates world identities/)
    assert.equal(d.posted('/v1/receipts').length, 0)
  } finally {
    d.close()
  }
})

// dist/main.js, compiled from main.ts.
const main = new URL('../main.js', import.meta.url).pathname

async function runMain (args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const p = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  p.stdout.on('data', (b: Buffer) => { stdout += b.toString() })
  p.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
  const [code] = await once(p, 'close') as [number | null]
  return { code, stdout, stderr }
}

test('main.js: the first run makes the key and says how to trust it; bad flags exit 2', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aos-exec-'))
  const key = join(dir, 'p.key')
  const first = await runMain(['--world', '/tmp/w', '--key', key])
  assert.equal(first.code, 0, first.stderr)
  assert.match(first.stdout, new RegExp(`aosd keys add payments ${key}.pub.pem --effects ${CHARGE_EFFECT} --world /tmp/w`))
  assert.equal(statSync(key).mode & 0o777, 0o600)
  for (const bad of [['--max', '0'], ['--decline-over', '-1'], ['--nope'], ['stray']]) {
    const r = await runMain(['--key', key, ...bad])
    assert.equal(r.code, 2, `${bad.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, /usage: node dist\/main.js/)
  }
  const help = await runMain(['--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /--fail-attempts N/)
})

test('main.js --once settles a claim and exits; SIGTERM stops a waiting executor with exit 0', async () => {
  const { path, key } = newKey()
  const d = await fakeDaemon({
    '/v1/effects/claim': [{ status: 200, body: claimJSON([intentJSON(6, '{"order_id":"o6","amount_cents":5,"customer":"c"}')]) }, 'hang'],
    '/v1/receipts': [{ status: 200, body: { seq: 3 } }]
  })
  const world = mkdtempSync(join(tmpdir(), 'aos-world-'))
  writeFileSync(join(world, 'token'), TOKEN)
  writeFileSync(join(world, 'daemon.json'), JSON.stringify({ addr: d.addr, pid: 1 }))
  try {
    const r = await runMain(['--world', world, '--key', path, '--once'])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stderr, /order o6: 5 cents succeeded on attempt 1; receipt ok journaled at seq 3/)
    verifiedReceipt(key, first(d.posted('/v1/receipts')))

    // This one finds the daemon by --url and --token-file instead.
    const p = spawn(process.execPath, [main, '--url', d.url, '--token-file', join(world, 'token'), '--key', path], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    p.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
    // The claim after --once's hangs: once it reached the daemon, stop.
    await d.waitFor('/v1/effects/claim', 2)
    p.kill('SIGTERM')
    const [code] = await once(p, 'close') as [number | null]
    assert.equal(code, 0, stderr)
    assert.match(stderr, /SIGTERM: stopping/)
    assert.equal(d.requests.at(-1)?.auth, 'Bearer ' + TOKEN)
  } finally {
    d.close()
  }
  readFileSync(path) // the key is still there
})
