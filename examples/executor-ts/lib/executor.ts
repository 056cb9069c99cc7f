/**
 * The executor loop (docs/API.md, "Executors"): long-poll a claim for the
 * effect it serves, perform each claimed intent, retrying transient
 * failures as the effect's retry policy says and reporting each retried
 * attempt as a signed stream frame, then post a signed receipt. Intents of
 * one claim run concurrently.
 *
 * What it relies on from the daemon: an intent is offered only once its
 * journal frame is durable; a lease that ends without a receipt makes the
 * intent claimable again (so the work must be idempotent per intent hash,
 * and a second receipt for a settled intent answers 409, which counts as
 * done); a receipt is judged on its signature, so retrying the POST after a
 * lost answer is safe.
 */
import type { KeyObject } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import { type JSONValue, type Value, encodeCanonical, member } from './canonical.js'
import { type Daemon, DaemonError, UnreachableError, errorMessage } from './daemon.js'
import { type Status, MalformedError, signFrame, signReceipt } from './receipts.js'

/** An effect's retry policy, as a claimed intent carries it. */
export interface RetryPolicy {
  /** attempts in all, at least 1 */
  readonly max_attempts: number
  /** wait after the first failed attempt */
  readonly initial_backoff_ms: number
  /** the wait doubles after each attempt up to this */
  readonly max_backoff_ms: number
}

/** The policy for an intent whose effect declares none (the daemon's built-in default). */
export const DEFAULT_RETRY: RetryPolicy = Object.freeze({ max_attempts: 3, initial_backoff_ms: 100, max_backoff_ms: 5000 })

/** An attempt that failed in a way worth retrying. */
export class TransientError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'TransientError'
  }
}

/**
 * The wait after failed attempt n (from 1), as the daemon's built-in
 * executors compute it.
 */
export function backoffMs (p: RetryPolicy, attempt: number): number {
  let d = p.initial_backoff_ms
  for (let i = 1; i < attempt && d < p.max_backoff_ms; i++) {
    d *= 2
  }
  return Math.min(d, p.max_backoff_ms)
}

/**
 * The policy a claimed intent carries (its "retry" member, JSON as the
 * daemon sent it), checked, or the default when it has none.
 */
export function retryPolicy (retry: JSONValue | undefined): RetryPolicy {
  if (retry === undefined || retry === null) {
    return DEFAULT_RETRY
  }
  const maxAttempts = member(retry, 'max_attempts')
  const initial = member(retry, 'initial_backoff_ms')
  const max = member(retry, 'max_backoff_ms')
  const n = (v: JSONValue | undefined): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
  if (!n(maxAttempts) || !n(initial) || !n(max)) {
    throw new Error(`claimed intent has a malformed retry policy ${JSON.stringify(retry, (_, v: unknown) => typeof v === 'bigint' ? v.toString() : v)}`)
  }
  return {
    max_attempts: Math.max(1, maxAttempts),
    initial_backoff_ms: initial,
    max_backoff_ms: Math.max(initial, max)
  }
}

/** A claimed intent, as POST /v1/effects/claim gives it (docs/API.md). */
export interface Intent {
  /**
   * the world's identity, from the claim answer: every receipt and frame
   * for the intent names it
   */
  readonly world: string
  /** "sha256:<64 hex>", unique per world */
  readonly hash: string
  readonly effect: string
  /** the params as JSON (integers beyond 2^53 as bigints) */
  readonly params: JSONValue
  /** base64 of the params' canonical CBOR */
  readonly params_cbor: string
  readonly origin_workflow: string
  /** the origin instance's key as JSON (null for a workflow without keys) */
  readonly origin_key: JSONValue
  /** absent when the intent has none */
  readonly issuer_ref?: string
  /** the seq of the step that opened the intent */
  readonly emitted_at: number | bigint
  /** RFC 3339 */
  readonly lease_until: string
  /** the effect's retry policy as sent, checked by retryPolicy; absent when it declares none */
  readonly retry?: JSONValue
}

/** The answer of POST /v1/effects/claim. */
export interface ClaimAnswer {
  /** the intents as sent, each checked by parseIntent before it is worked on */
  readonly intents: readonly JSONValue[]
  /** the world's identity, which every receipt and frame must name */
  readonly world: string
}

const show = (v: JSONValue): string => JSON.stringify(v, (_, x: unknown) => typeof x === 'bigint' ? x.toString() : x)

/**
 * Reads the answer of a claim: an object with an array "intents" and the
 * world's identity "world" (a daemon from before world identities sends
 * none, and would take no receipt this executor signs).
 */
export function parseClaimAnswer (v: JSONValue): ClaimAnswer {
  const intents = member(v, 'intents')
  if (!Array.isArray(intents)) {
    throw new Error(`claim answer without intents: ${show(v)}`)
  }
  const world = member(v, 'world')
  if (typeof world !== 'string' || world === '') {
    throw new Error(`claim answer without the world's identity ("world"): the daemon predates world identities (receipts name the world they are for since aos/receipt/v2): ${show(v)}`)
  }
  return { intents, world }
}

/**
 * Reads one claimed intent of world, refusing (MalformedError, naming the
 * member) one that lacks what the executor needs; index is its place in
 * the answer.
 */
export function parseIntent (v: JSONValue, index: number, world: string): Intent {
  const where = `claim answer: intents/${index}`
  const str = (name: string): string => {
    const x = member(v, name)
    if (typeof x !== 'string') {
      throw new MalformedError(`${where}/${name}: want a string`)
    }
    return x
  }
  const has = (name: string): JSONValue => {
    const x = member(v, name)
    if (x === undefined) {
      throw new MalformedError(`${where}/${name}: missing`)
    }
    return x
  }
  const uint = (name: string): number | bigint => {
    const x = has(name)
    if (!((typeof x === 'number' && Number.isSafeInteger(x) && x >= 0) || (typeof x === 'bigint' && x >= 0n))) {
      throw new MalformedError(`${where}/${name}: want a non-negative integer`)
    }
    return x
  }
  // In the order the daemon writes them, so the first missing is named.
  const base = {
    world,
    hash: str('hash'),
    effect: str('effect'),
    params: has('params'),
    params_cbor: str('params_cbor'),
    origin_workflow: str('origin_workflow'),
    origin_key: has('origin_key'),
    emitted_at: uint('emitted_at'),
    lease_until: str('lease_until')
  }
  const issuerRef = member(v, 'issuer_ref')
  if (issuerRef !== undefined && typeof issuerRef !== 'string') {
    throw new MalformedError(`${where}/issuer_ref: want a string`)
  }
  const retry = member(v, 'retry')
  return {
    ...base,
    ...(issuerRef === undefined ? {} : { issuer_ref: issuerRef }),
    ...(retry === undefined ? {} : { retry })
  }
}

/** What performing one intent yields. */
export interface Work {
  status: Status
  /**
   * the receipt value, encoded canonically; a value without a canonical
   * form (from code that escaped the types) settles the intent as an error
   */
  payload: Value
  /** for the log */
  summary: string
}

/**
 * Performs one attempt of an intent (attempt from 1): resolves to the
 * receipt's status and payload, or throws TransientError (retried) or any
 * other error (an error receipt at once).
 */
export type Perform = (intent: Intent, attempt: number) => Promise<Work>

/** What an executor serves and how it claims. */
export interface ExecutorOptions {
  daemon: Daemon
  key: KeyObject
  /** the executor name the key is trusted under */
  name: string
  /** the effect served */
  effect: string
  perform: Perform
  log?: ((line: string) => void) | undefined
  /** intents per claim (default 16) */
  max?: number | undefined
  /** (default 30000) */
  leaseMs?: number | undefined
  /** long-poll (default 20000) */
  waitMs?: number | undefined
}

/** How settling one intent ended, for tests and logs. */
export type Outcome = 'settled' | 'rejected' | 'skipped' | 'malformed' | 'unsigned' | 'refused' | 'duplicate' | 'dropped' | 'conflict'

export class Executor {
  readonly daemon: Daemon
  readonly key: KeyObject
  readonly name: string
  readonly effect: string
  readonly perform: Perform
  readonly log: (line: string) => void
  readonly max: number
  readonly leaseMs: number
  readonly waitMs: number

  constructor (o: ExecutorOptions) {
    this.daemon = o.daemon
    this.key = o.key
    this.name = o.name
    this.effect = o.effect
    this.perform = o.perform
    this.log = o.log ?? ((line) => console.error(line))
    this.max = o.max ?? 16
    this.leaseMs = o.leaseMs ?? 30000
    this.waitMs = o.waitMs ?? 20000
  }

  /**
   * Claims once (waiting up to waitMs for work) and settles what it got;
   * resolves to how many intents it claimed. A claimed intent the executor
   * cannot read is logged and left to its lease (the others go on).
   */
  async serveBatch (signal?: AbortSignal): Promise<number> {
    const req = JSON.stringify({ executor: this.name, effects: [this.effect], max: this.max, lease_ms: this.leaseMs, wait_ms: this.waitMs })
    const { intents, world } = parseClaimAnswer(await this.daemon.post('/v1/effects/claim', req, signal))
    await Promise.all(intents.map(async (v, i): Promise<Outcome> => {
      let it: Intent
      try {
        it = parseIntent(v, i, world)
      } catch (e) {
        this.log(`${errorMessage(e)}; left to its lease`)
        return 'malformed'
      }
      return await this.settle(it, signal)
    }))
    return intents.length
  }

  /**
   * Performs one intent and posts its receipt. It never throws for the
   * intent's own troubles (they end in an error receipt, or in the log and
   * the lease); it rejects only when aborted.
   */
  async settle (it: Intent, signal?: AbortSignal): Promise<Outcome> {
    if (it.effect !== this.effect) {
      this.log(`intent ${it.hash}: claimed for effect ${it.effect}, which this executor does not serve; left to its lease`)
      return 'skipped'
    }
    let policy: RetryPolicy
    try {
      policy = retryPolicy(it.retry)
    } catch (e) {
      policy = DEFAULT_RETRY
      this.log(`intent ${it.hash}: ${errorMessage(e)}; using ${JSON.stringify(DEFAULT_RETRY)}`)
    }
    let work: Work
    let attempt = 1
    for (; ; attempt++) {
      try {
        work = await this.perform(it, attempt)
        break
      } catch (e) {
        const message = errorMessage(e)
        if (!(e instanceof TransientError) || attempt >= policy.max_attempts) {
          work = { status: 'error', payload: { error: message, attempts: attempt }, summary: `failed after ${attempt} attempt(s): ${message}` }
          break
        }
        const wait = backoffMs(policy, attempt)
        await this.postFrame(it, attempt, { attempt, error: message, retry_in_ms: wait }, signal)
        await delay(wait, undefined, { signal })
      }
    }
    let payload: Uint8Array
    try {
      payload = encodeCanonical(work.payload)
    } catch (e) {
      // The work's own result cannot be sent: settle the intent as an
      // error rather than leave it to be claimed and fail again forever.
      const message = `the executor's receipt payload has no canonical form: ${errorMessage(e)}`
      work = { status: 'error', payload: { error: message, attempts: attempt }, summary: message }
      payload = encodeCanonical(work.payload)
    }
    let json: string
    try {
      json = signReceipt(this.key, {
        world: it.world,
        intentHash: it.hash,
        effect: it.effect,
        executor: this.name,
        status: work.status,
        attempt,
        issuerRef: it.issuer_ref,
        payload
      }).json
    } catch (e) {
      this.log(`intent ${it.hash}: cannot sign a receipt: ${errorMessage(e)}; left to its lease`)
      return 'unsigned'
    }
    return await this.postReceipt(it, json, work, signal)
  }

  /**
   * Posts a receipt, retrying while the daemon is unreachable or answers
   * 5xx (the work is done; only the answer is missing), until it is taken,
   * refused, or the signal aborts.
   */
  async postReceipt (it: Intent, json: string, work: Work, signal?: AbortSignal): Promise<Outcome> {
    for (let wait = 100; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const res = await this.daemon.post('/v1/receipts', json, signal)
        const seq = member(res, 'seq')
        const rejectedBy = member(res, 'rejected')
        const rejected = rejectedBy ? ` (the payload failed the receipt schema: ${String(rejectedBy)})` : ''
        this.log(`intent ${it.hash}: ${work.summary}; receipt ${work.status} journaled at seq ${String(seq)}${rejected}`)
        return rejectedBy ? 'rejected' : 'settled'
      } catch (e) {
        if (signal?.aborted) {
          throw e
        }
        const err = requestError(e)
        if (err instanceof DaemonError && err.status === 409) {
          // duplicate: settled already (by this executor before a lost
          // answer, or by another after an expired lease); dropped: the
          // intent's cell failed meanwhile. Either way nothing is left to do.
          this.log(`intent ${it.hash}: already settled (${err.code}): ${err.message}`)
          return err.code === 'duplicate' || err.code === 'dropped' ? err.code : 'conflict'
        }
        if (!err.transient) {
          const status = err instanceof DaemonError ? err.status : 0
          const hint = status === 403 && err instanceof DaemonError && err.code === 'untrusted'
            ? ` (is the key trusted for ${it.effect}? aosd keys add ${this.name} KEY.pub.pem --effects ${it.effect})`
            : ''
          this.log(`intent ${it.hash}: receipt refused: ${err.message}${hint}; left to its lease`)
          return 'refused'
        }
        this.log(`intent ${it.hash}: posting the receipt: ${err.message}; trying again in ${wait} ms`)
        await delay(wait, undefined, { signal })
      }
    }
  }

  /**
   * Posts a progress frame; frames are not authoritative, so a refusal is
   * logged and the work goes on.
   */
  async postFrame (it: Intent, seq: number, value: Value, signal?: AbortSignal): Promise<void> {
    try {
      const f = signFrame(this.key, { world: it.world, intentHash: it.hash, effect: it.effect, seq, executor: this.name, payload: encodeCanonical(value) })
      await this.daemon.post('/v1/frames', f.json, signal)
    } catch (e) {
      if (signal?.aborted) {
        throw e
      }
      this.log(`intent ${it.hash}: frame ${seq} not recorded: ${errorMessage(e)}`)
    }
  }

  /**
   * Serves until the signal aborts (or, with once, after the first claim
   * that got work). A claim that fails is tried again after a growing
   * pause; a 401 (wrong token) or 400 (a request the daemon will never
   * take) ends it.
   */
  async run (signal: AbortSignal, { once = false }: { once?: boolean } = {}): Promise<void> {
    let pause = 1000
    while (!signal.aborted) {
      try {
        const n = await this.serveBatch(signal)
        pause = 1000
        if (once && n > 0) {
          return
        }
      } catch (e) {
        if (signal.aborted) {
          return
        }
        if (e instanceof DaemonError && (e.status === 401 || e.status === 400)) {
          throw e
        }
        this.log(`${errorMessage(e)} (trying again in ${pause / 1000} s)`)
        try {
          await delay(pause, undefined, { signal })
        } catch {
          return
        }
        pause = Math.min(pause * 2, 30000)
      }
    }
  }
}

/**
 * What a failed request threw, as one of the daemon client's errors:
 * anything else (a bug, not the network) counts as not transient.
 */
function requestError (e: unknown): DaemonError | UnreachableError | { transient: false, message: string } {
  if (e instanceof DaemonError || e instanceof UnreachableError) {
    return e
  }
  return { transient: false, message: errorMessage(e) }
}
