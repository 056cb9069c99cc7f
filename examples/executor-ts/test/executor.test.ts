// The executor against a scripted daemon on loopback: the answers a real
// daemon gives only under faults (5xx, lost connections, duplicates,
// refusals) are scripted here; cmd/aosd/executor_node_e2e_test.go runs the
// executor against the real daemon. Every receipt and frame posted is
// checked against the executor's public key.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { createServer } from 'node:http'
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPublicKey } from 'node:crypto'
import { parseJSON } from '../lib/canonical.js'
import { Daemon } from '../lib/daemon.js'
import { Executor, backoffMs, retryPolicy } from '../lib/executor.js'
import { CHARGE_EFFECT, standInPayments } from '../lib/payments.js'
import { createKeyFiles, frameBody, keyId, receiptBody, verifySignature } from '../lib/receipts.js'
import { decode } from 'cbor2'

const TOKEN = 'test-token'

/**
 * A scripted daemon: each path has a queue of answers ({status, body}
 * objects, or functions of the request); the last answer repeats.
 * @param {Record<string, Array<any>>} script
 */
async function fakeDaemon (script) {
  /** @type {{path: string, body: string, auth: string | undefined}[]} */
  const requests = []
  const arrived = new EventEmitter()
  const server = createServer(async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    requests.push({ path: req.url ?? '', body, auth: req.headers.authorization })
    arrived.emit('request')
    const queue = script[req.url ?? ''] ?? [{ status: 404, body: { error: { code: 'not_found', message: 'no such route' } } }]
    let answer = queue.length > 1 ? queue.shift() : queue[0]
    if (typeof answer === 'function') answer = await answer(body, req, res)
    if (answer === 'hang') return // hold the request open (a long poll)
    res.writeHead(answer.status, { 'content-type': 'application/json' })
    res.end(typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const addr = /** @type {import('node:net').AddressInfo} */ (server.address())
  return {
    url: `http://127.0.0.1:${addr.port}`,
    addr: `127.0.0.1:${addr.port}`,
    requests,
    /** @param {string} path */
    posted: (path) => requests.filter((r) => r.path === path).map((r) => /** @type {any} */ (parseJSON(r.body))),
    /** Resolves once n requests for path have arrived. @param {string} path @param {number} n */
    async waitFor (path, n) {
      while (requests.filter((r) => r.path === path).length < n) await once(arrived, 'request')
    },
    close: () => { server.closeAllConnections(); server.close() }
  }
}

function newKey () {
  const dir = mkdtempSync(join(tmpdir(), 'aos-exec-'))
  const path = join(dir, 'payments.key')
  return { key: createKeyFiles(path), path, dir }
}

/**
 * Checks a posted receipt's signature and returns its payload value.
 * @param {import('node:crypto').KeyObject} key
 * @param {any} r
 */
function verifiedReceipt (key, r) {
  const body = receiptBody({ intentHash: r.intent_hash, effect: r.effect, executor: r.executor, status: r.status, attempt: r.attempt, issuerRef: r.issuer_ref, payload: Buffer.from(r.payload_cbor, 'base64') })
  assert.equal(r.key_id, keyId(key))
  assert.ok(verifySignature(createPublicKey(key), 'receipt', body, Buffer.from(r.signature, 'base64')), 'receipt signature')
  return decode(Buffer.from(r.payload_cbor, 'base64'))
}

/** @param {import('node:crypto').KeyObject} key @param {any} f */
function verifiedFrame (key, f) {
  const body = frameBody({ intentHash: f.intent_hash, effect: f.effect, seq: f.seq, executor: f.executor, payload: Buffer.from(f.payload_cbor, 'base64') })
  assert.ok(verifySignature(createPublicKey(key), 'frame', body, Buffer.from(f.signature, 'base64')), 'frame signature')
  return decode(Buffer.from(f.payload_cbor, 'base64'))
}

const hashOf = (/** @type {number} */ i) => 'sha256:' + i.toString(16).padStart(2, '0').repeat(32)
/** @param {number} i @param {string} params JSON @param {string} [retry] JSON */
const intentJSON = (i, params, retry) =>
  `{"hash":"${hashOf(i)}","effect":"${CHARGE_EFFECT}","params":${params},"params_cbor":"","origin_workflow":"com.example/order.step@1",` +
  `"origin_key":"o${i}","emitted_at":${i},"lease_until":"2030-01-01T00:00:00Z"${retry ? ',"retry":' + retry : ''}}`
const claimJSON = (/** @type {string[]} */ intents) => `{"intents":[${intents.join(',')}]}`
const fastRetry = '{"max_attempts":3,"initial_backoff_ms":1,"max_backoff_ms":2}'

/** @param {string} url @param {import('node:crypto').KeyObject} key @param {any} perform */
function executorFor (url, key, perform, lines = /** @type {string[]} */ ([])) {
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
    const receipts = d.posted('/v1/receipts').sort((a, b) => a.intent_hash.localeCompare(b.intent_hash))
    assert.equal(receipts.length, 2)
    assert.deepEqual(receipts.map((r) => [r.status, r.attempt, r.executor, r.effect]), [['ok', 2, 'payments', CHARGE_EFFECT], ['ok', 2, 'payments', CHARGE_EFFECT]])
    assert.deepEqual(verifiedReceipt(key, receipts[0]), { charge_id: 'ch_' + '01'.repeat(6), status: 'succeeded' })
    assert.deepEqual(verifiedReceipt(key, receipts[1]), { charge_id: 'ch_' + '02'.repeat(6), status: 'declined' })
    const frames = d.posted('/v1/frames')
    assert.equal(frames.length, 2)
    for (const f of frames) {
      assert.equal(f.seq, 1)
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
    /** @type {string[]} */
    const events = []
    /** @param {any} it */
    const perform = async (it) => {
      events.push('s' + it.emitted_at)
      await new Promise((resolve) => setImmediate(resolve))
      events.push('e' + it.emitted_at)
      return { status: /** @type {const} */ ('ok'), payload: {}, summary: 'done' }
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
    assert.deepEqual(d.posted('/v1/frames').map((f) => f.seq), [1, 2])
    const [r] = d.posted('/v1/receipts')
    assert.equal(r.status, 'error')
    assert.equal(r.attempt, 3)
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
    const [r] = d.posted('/v1/receipts')
    assert.equal(r.status, 'error')
    assert.equal(r.attempt, 1)
    assert.deepEqual(verifiedReceipt(key, r), { error: 'params: /amount_cents: want an integer of at least 1', attempts: 1 })
  } finally {
    d.close()
  }
})

test('posting a receipt: 5xx and lost answers are retried, 409 is done, 403 and 404 are not retried', async (t) => {
  const cases = [
    { name: '503 twice, then taken', answers: [{ status: 503, body: { error: { code: 'unavailable', message: 'closing' } } }, { status: 503, body: '' }, { status: 200, body: { seq: 7 } }], outcome: 'settled', posts: 3 },
    { name: 'the connection drops, then taken', answers: [(_b, _q, res) => { res.destroy(); return 'hang' }, { status: 200, body: { seq: 7 } }], outcome: 'settled', posts: 2 },
    { name: 'duplicate', answers: [{ status: 409, body: { error: { code: 'duplicate', message: 'settled at seq 5' } } }], outcome: 'duplicate', posts: 1 },
    { name: 'dropped', answers: [{ status: 409, body: { error: { code: 'dropped', message: 'cell failed' } } }], outcome: 'dropped', posts: 1 },
    { name: 'untrusted', answers: [{ status: 403, body: { error: { code: 'untrusted', message: 'unknown signer' } } }], outcome: 'refused', posts: 1, log: /aosd keys add payments KEY.pub.pem --effects com.example\/payment.charge@1/ },
    { name: 'unknown intent', answers: [{ status: 404, body: { error: { code: 'unknown_intent', message: 'never issued' } } }], outcome: 'refused', posts: 1 },
    { name: 'rejected payload', answers: [{ status: 200, body: { seq: 9, rejected: 'payload does not validate' } }], outcome: 'rejected', posts: 1 }
  ]
  const { key } = newKey()
  for (const c of cases) {
    await t.test(c.name, async () => {
      const d = await fakeDaemon({ '/v1/receipts': c.answers })
      try {
        /** @type {string[]} */
        const lines = []
        const ex = executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 }), lines)
        const it = /** @type {any} */ (parseJSON(intentJSON(5, '{"order_id":"o5","amount_cents":5,"customer":"c"}')))
        assert.equal(await ex.settle(it), c.outcome)
        assert.equal(d.posted('/v1/receipts').length, c.posts)
        if (c.log) assert.ok(lines.some((l) => c.log.test(l)), lines.join('\n'))
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
    /** @type {string[]} */
    const lines = []
    const ex = executorFor(d.url, key, standInPayments({ declineOver: 100n, failAttempts: 0 }), lines)
    await assert.rejects(ex.run(new AbortController().signal), { status: 401 })
    assert.equal(d.posted('/v1/effects/claim').length, 2)
    assert.match(lines[0], /HTTP 500 internal: boom \(trying again in 1 s\)/)
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
    assert.equal(d.requests[0].auth, 'Bearer ' + TOKEN)
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
    assert.equal(await ex.settle(/** @type {any} */ (parseJSON(intentJSON(7, '{}')))), 'settled')
    assert.deepEqual(verifiedReceipt(key, d.posted('/v1/receipts')[0]), { error: 'provider said no', attempts: 1 })
  } finally {
    d.close()
  }
})

test('a result with no canonical form settles as an error, not a lease that fails forever', async () => {
  const { key } = newKey()
  const d = await fakeDaemon({ '/v1/receipts': [{ status: 200, body: { seq: 2 } }] })
  try {
    const ex = executorFor(d.url, key, async () => ({ status: 'ok', payload: { charge_id: 'c', at: new Date(0) }, summary: 'x' }))
    assert.equal(await ex.settle(/** @type {any} */ (parseJSON(intentJSON(8, '{}')))), 'settled')
    const r = d.posted('/v1/receipts')[0]
    assert.equal(r.status, 'error')
    assert.deepEqual(verifiedReceipt(key, r), { error: "the executor's receipt payload has no canonical form: /at: a Date has no canonical form (use a plain object, an array or a Uint8Array)", attempts: 1 })
  } finally {
    d.close()
  }
})

const main = new URL('../main.js', import.meta.url).pathname

/** @param {string[]} args */
async function runMain (args) {
  const p = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  p.stdout.on('data', (b) => { stdout += b })
  p.stderr.on('data', (b) => { stderr += b })
  const [code] = await once(p, 'close')
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
    assert.equal(r.code, 2, `${bad}: ${r.stderr}`)
    assert.match(r.stderr, /usage: node main.js/)
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
    verifiedReceipt(key, d.posted('/v1/receipts')[0])

    // This one finds the daemon by --url and --token-file instead.
    const p = spawn(process.execPath, [main, '--url', d.url, '--token-file', join(world, 'token'), '--key', path], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    p.stderr.on('data', (b) => { stderr += b })
    // The claim after --once's hangs: once it reached the daemon, stop.
    await d.waitFor('/v1/effects/claim', 2)
    p.kill('SIGTERM')
    const [code] = await once(p, 'close')
    assert.equal(code, 0, stderr)
    assert.match(stderr, /SIGTERM: stopping/)
    assert.equal(d.requests.at(-1)?.auth, 'Bearer ' + TOKEN)
  } finally {
    d.close()
  }
  readFileSync(path) // the key is still there
})
