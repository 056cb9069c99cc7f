// @ts-check
/**
 * A client for the HTTP API of `aosd serve` (docs/API.md): the daemon's
 * address from WORLD/daemon.json (read again after a failed connection, as
 * a restarted daemon listens on a new port) and the bearer token from
 * WORLD/token, or both given explicitly. Answers are parsed with parseJSON,
 * so integers keep every digit.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseJSON } from './canonical.js'

/** The daemon answered with an error status. */
export class DaemonError extends Error {
  /**
   * @param {string} what the request, e.g. "POST /v1/receipts"
   * @param {number} status HTTP status
   * @param {string} code the API's error code ("duplicate", "untrusted", ...), or ""
   * @param {string} message the API's message, or the body
   */
  constructor (what, status, code, message) {
    super(`${what}: HTTP ${status}${code ? ' ' + code : ''}: ${message}`)
    this.name = 'DaemonError'
    this.status = status
    this.code = code
  }

  /** Worth trying again: the daemon is closing, restarting or overloaded. */
  get transient () {
    return this.status >= 500 || this.status === 429
  }
}

/** No daemon answered (not running, restarting, or the address is stale). */
export class UnreachableError extends Error {
  /** @param {string} message @param {unknown} [cause] */
  constructor (message, cause) {
    super(message, { cause })
    this.name = 'UnreachableError'
  }

  get transient () {
    return true
  }
}

export class Daemon {
  /**
   * @param {object} opts
   * @param {string} [opts.world] world directory (daemon.json, token)
   * @param {string} [opts.url] base URL, instead of WORLD/daemon.json
   * @param {string} [opts.token] bearer token, instead of WORLD/token
   * @param {string} [opts.tokenFile] file holding the token
   * @param {number} [opts.timeoutMs] give up on a request after this long
   *   (default 90 s: longer than the longest claim long-poll, 60 s), so a
   *   daemon that stopped answering cannot hang the executor
   */
  constructor ({ world, url, token, tokenFile, timeoutMs = 90000 }) {
    if (!url && !world) {
      throw new Error('give a world directory or a daemon URL')
    }
    this.world = world
    this.fixedURL = url ? url.replace(/\/+$/, '') : undefined
    this.tokenValue = token
    this.tokenFile = tokenFile ?? (world ? join(world, 'token') : undefined)
    this.timeoutMs = timeoutMs
    /** @type {string | undefined} */
    this.cachedURL = undefined
  }

  baseURL () {
    if (this.fixedURL) {
      return this.fixedURL
    }
    if (this.cachedURL) {
      return this.cachedURL
    }
    const file = join(/** @type {string} */ (this.world), 'daemon.json')
    let info
    try {
      info = /** @type {any} */ (parseJSON(readFileSync(file)))
    } catch (e) {
      throw new UnreachableError(`no daemon for ${this.world} (start \`aosd serve --world ${this.world}\`): ${/** @type {Error} */ (e).message}`, e)
    }
    if (typeof info?.addr !== 'string') {
      throw new UnreachableError(`${file}: no "addr"`)
    }
    this.cachedURL = 'http://' + info.addr
    return this.cachedURL
  }

  token () {
    if (this.tokenValue === undefined) {
      if (!this.tokenFile) {
        throw new Error('no token: give --token-file')
      }
      this.tokenValue = readFileSync(this.tokenFile, 'utf8').trim()
    }
    return this.tokenValue
  }

  /**
   * POSTs a JSON body and returns the parsed answer of a 2xx; other
   * statuses throw DaemonError, failed connections UnreachableError.
   * @param {string} path
   * @param {string} body JSON text
   * @param {AbortSignal} [signal]
   * @returns {Promise<any>}
   */
  async post (path, body, signal) {
    const what = `POST ${path}`
    const url = this.baseURL() + path
    let resp
    try {
      resp = await fetch(url, {
        method: 'POST',
        headers: { authorization: 'Bearer ' + this.token(), 'content-type': 'application/json' },
        body,
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]) : AbortSignal.timeout(this.timeoutMs)
      })
    } catch (e) {
      if (signal?.aborted) {
        throw e
      }
      this.cachedURL = undefined // a restarted daemon writes a new address
      throw new UnreachableError(`${what}: ${url}: ${/** @type {Error} */ (e).cause ?? e}`, e)
    }
    let text
    try {
      text = await resp.text()
    } catch (e) {
      if (signal?.aborted) {
        throw e
      }
      this.cachedURL = undefined
      throw new UnreachableError(`${what}: reading the answer: ${/** @type {Error} */ (e).message}`, e)
    }
    let parsed
    try {
      parsed = text === '' ? null : parseJSON(text)
    } catch {
      parsed = undefined
    }
    if (resp.ok) {
      if (parsed === undefined) {
        throw new DaemonError(what, resp.status, '', `answer is not JSON: ${text.slice(0, 200)}`)
      }
      return parsed
    }
    const err = /** @type {any} */ (parsed)?.error
    throw new DaemonError(what, resp.status, typeof err?.code === 'string' ? err.code : '',
      typeof err?.message === 'string' ? err.message : text.slice(0, 500))
  }
}
