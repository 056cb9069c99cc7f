// @ts-check
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
import { setTimeout as delay } from 'node:timers/promises'
import { encodeCanonical } from './canonical.js'
import { signFrame, signReceipt } from './receipts.js'

/** The policy for an intent whose effect declares none (the daemon's built-in default). */
export const DEFAULT_RETRY = Object.freeze({ max_attempts: 3, initial_backoff_ms: 100, max_backoff_ms: 5000 })

/** An attempt that failed in a way worth retrying. */
export class TransientError extends Error {
  /** @param {string} message */
  constructor (message) {
    super(message)
    this.name = 'TransientError'
  }
}

/**
 * @typedef {object} RetryPolicy
 * @property {number} max_attempts attempts in all, at least 1
 * @property {number} initial_backoff_ms wait after the first failed attempt
 * @property {number} max_backoff_ms the wait doubles after each attempt up to this
 */

/**
 * The wait after failed attempt n (from 1), as the daemon's built-in
 * executors compute it.
 * @param {RetryPolicy} p
 * @param {number} attempt
 */
export function backoffMs (p, attempt) {
  let d = p.initial_backoff_ms
  for (let i = 1; i < attempt && d < p.max_backoff_ms; i++) {
    d *= 2
  }
  return Math.min(d, p.max_backoff_ms)
}

/**
 * The policy a claimed intent carries, checked, or the default.
 * @param {any} retry
 * @returns {RetryPolicy}
 */
export function retryPolicy (retry) {
  if (retry === undefined || retry === null) {
    return DEFAULT_RETRY
  }
  const n = (/** @type {unknown} */ v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
  if (!n(retry.max_attempts) || !n(retry.initial_backoff_ms) || !n(retry.max_backoff_ms)) {
    throw new Error(`claimed intent has a malformed retry policy ${JSON.stringify(retry)}`)
  }
  return {
    max_attempts: Math.max(1, retry.max_attempts),
    initial_backoff_ms: retry.initial_backoff_ms,
    max_backoff_ms: Math.max(retry.initial_backoff_ms, retry.max_backoff_ms)
  }
}

/**
 * @typedef {object} Intent a claimed intent, as POST /v1/effects/claim gives it
 * @property {string} hash
 * @property {string} effect
 * @property {any} params
 * @property {string} [issuer_ref]
 * @property {string} lease_until
 * @property {any} [retry]
 */

/**
 * @typedef {object} Work what performing one intent yields
 * @property {'ok' | 'error' | 'timeout'} status
 * @property {unknown} payload the receipt value (encoded canonically)
 * @property {string} summary for the log
 */

/**
 * Performs one attempt of an intent: resolves to the receipt's status and
 * payload, or throws TransientError (retried) or any other error (an error
 * receipt at once).
 * @callback Perform
 * @param {Intent} intent
 * @param {number} attempt from 1
 * @returns {Promise<Work>}
 */

/**
 * @typedef {object} ExecutorOptions
 * @property {import('./daemon.js').Daemon} daemon
 * @property {import('node:crypto').KeyObject} key
 * @property {string} name the executor name the key is trusted under
 * @property {string} effect the effect served
 * @property {Perform} perform
 * @property {(line: string) => void} [log]
 * @property {number} [max] intents per claim (default 16)
 * @property {number} [leaseMs] (default 30000)
 * @property {number} [waitMs] long-poll (default 20000)
 */

export class Executor {
  /** @param {ExecutorOptions} o */
  constructor (o) {
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
   * Claims once (waiting up to waitMs for work) and settles what it got.
   * @param {AbortSignal} [signal]
   * @returns {Promise<number>} how many intents it claimed
   */
  async serveBatch (signal) {
    const req = JSON.stringify({ executor: this.name, effects: [this.effect], max: this.max, lease_ms: this.leaseMs, wait_ms: this.waitMs })
    const resp = await this.daemon.post('/v1/effects/claim', req, signal)
    const intents = /** @type {Intent[]} */ (resp?.intents)
    if (!Array.isArray(intents)) {
      throw new Error(`claim answer without intents: ${JSON.stringify(resp)}`)
    }
    await Promise.all(intents.map((it) => this.settle(it, signal)))
    return intents.length
  }

  /**
   * Performs one intent and posts its receipt. It never throws for the
   * intent's own troubles (they end in an error receipt, or in the log and
   * the lease); it rejects only when aborted.
   * @param {Intent} it
   * @param {AbortSignal} [signal]
   * @returns {Promise<string>} the outcome, for tests and logs
   */
  async settle (it, signal) {
    if (it.effect !== this.effect) {
      this.log(`intent ${it.hash}: claimed for effect ${it.effect}, which this executor does not serve; left to its lease`)
      return 'skipped'
    }
    let policy
    try {
      policy = retryPolicy(it.retry)
    } catch (e) {
      policy = DEFAULT_RETRY
      this.log(`intent ${it.hash}: ${/** @type {Error} */ (e).message}; using ${JSON.stringify(DEFAULT_RETRY)}`)
    }
    /** @type {Work} */
    let work
    let attempt = 1
    for (; ; attempt++) {
      try {
        work = await this.perform(it, attempt)
        break
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e)
        if (!(e instanceof TransientError) || attempt >= policy.max_attempts) {
          work = { status: 'error', payload: { error: message, attempts: attempt }, summary: `failed after ${attempt} attempt(s): ${message}` }
          break
        }
        const wait = backoffMs(policy, attempt)
        await this.postFrame(it, attempt, { attempt, error: message, retry_in_ms: wait }, signal)
        await delay(wait, undefined, { signal })
      }
    }
    let payload
    try {
      payload = encodeCanonical(work.payload)
    } catch (e) {
      // The work's own result cannot be sent: settle the intent as an
      // error rather than leave it to be claimed and fail again forever.
      const message = `the executor's receipt payload has no canonical form: ${/** @type {Error} */ (e).message}`
      work = { status: 'error', payload: { error: message, attempts: attempt }, summary: message }
      payload = encodeCanonical(work.payload)
    }
    let signed
    try {
      signed = signReceipt(this.key, {
        intentHash: it.hash,
        effect: it.effect,
        executor: this.name,
        status: work.status,
        attempt,
        issuerRef: it.issuer_ref,
        payload
      })
    } catch (e) {
      this.log(`intent ${it.hash}: cannot sign a receipt: ${/** @type {Error} */ (e).message}; left to its lease`)
      return 'unsigned'
    }
    return this.postReceipt(it, signed.json, work, signal)
  }

  /**
   * Posts a receipt, retrying while the daemon is unreachable or answers
   * 5xx (the work is done; only the answer is missing), until it is taken,
   * refused, or the signal aborts.
   * @param {Intent} it
   * @param {string} json
   * @param {Work} work
   * @param {AbortSignal} [signal]
   */
  async postReceipt (it, json, work, signal) {
    for (let wait = 100; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const res = await this.daemon.post('/v1/receipts', json, signal)
        const rejected = res?.rejected ? ` (the payload failed the receipt schema: ${res.rejected})` : ''
        this.log(`intent ${it.hash}: ${work.summary}; receipt ${work.status} journaled at seq ${res?.seq}${rejected}`)
        return res?.rejected ? 'rejected' : 'settled'
      } catch (e) {
        const err = /** @type {any} */ (e)
        if (signal?.aborted) {
          throw e
        }
        if (err.status === 409) {
          // duplicate: settled already (by this executor before a lost
          // answer, or by another after an expired lease); dropped: the
          // intent's cell failed meanwhile. Either way nothing is left to do.
          this.log(`intent ${it.hash}: already settled (${err.code}): ${err.message}`)
          return err.code || 'conflict'
        }
        if (!err.transient) {
          const hint = err.status === 403 ? ` (is the key trusted for ${it.effect}? aosd keys add ${this.name} KEY.pub.pem --effects ${it.effect})` : ''
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
   * @param {Intent} it
   * @param {number} seq
   * @param {unknown} value
   * @param {AbortSignal} [signal]
   */
  async postFrame (it, seq, value, signal) {
    try {
      const f = signFrame(this.key, { intentHash: it.hash, effect: it.effect, seq, executor: this.name, payload: encodeCanonical(value) })
      await this.daemon.post('/v1/frames', f.json, signal)
    } catch (e) {
      if (signal?.aborted) {
        throw e
      }
      this.log(`intent ${it.hash}: frame ${seq} not recorded: ${/** @type {Error} */ (e).message}`)
    }
  }

  /**
   * Serves until the signal aborts (or, with once, after the first claim
   * that got work). A claim that fails is tried again after a growing
   * pause; a 401 (wrong token) ends it.
   * @param {AbortSignal} signal
   * @param {{once?: boolean}} [opts]
   */
  async run (signal, { once = false } = {}) {
    let pause = 1000
    while (!signal.aborted) {
      try {
        const n = await this.serveBatch(signal)
        pause = 1000
        if (once && n > 0) {
          return
        }
      } catch (e) {
        const err = /** @type {any} */ (e)
        if (signal.aborted) {
          return
        }
        if (err.status === 401 || err.status === 400) {
          throw err
        }
        this.log(`${err.message} (trying again in ${pause / 1000} s)`)
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
