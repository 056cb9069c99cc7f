/**
 * A client for the HTTP API of `aosd serve` (docs/API.md): the daemon's
 * address from WORLD/daemon.json (read again after a failed connection, as
 * a restarted daemon listens on a new port) and the bearer token from
 * WORLD/token, or both given explicitly. Answers are parsed with parseJSON,
 * so integers keep every digit.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { type JSONValue, member, parseJSON } from './canonical.js'

/** The daemon answered with an error status. */
export class DaemonError extends Error {
  /** HTTP status */
  readonly status: number
  /** the API's error code ("duplicate", "untrusted", ...), or "" */
  readonly code: string

  /**
   * what is the request, e.g. "POST /v1/receipts"; message the API's
   * message, or the body.
   */
  constructor (what: string, status: number, code: string, message: string) {
    super(`${what}: HTTP ${status}${code ? ' ' + code : ''}: ${message}`)
    this.name = 'DaemonError'
    this.status = status
    this.code = code
  }

  /** Worth trying again: the daemon is closing, restarting or overloaded. */
  get transient (): boolean {
    return this.status >= 500 || this.status === 429
  }
}

/** No daemon answered (not running, restarting, or the address is stale). */
export class UnreachableError extends Error {
  constructor (message: string, cause?: unknown) {
    super(message, { cause })
    this.name = 'UnreachableError'
  }

  get transient (): boolean {
    return true
  }
}

/** Where the daemon is and how to authenticate to it. */
export interface DaemonOptions {
  /** world directory (daemon.json, token) */
  world?: string | undefined
  /** base URL, instead of WORLD/daemon.json */
  url?: string | undefined
  /** bearer token, instead of WORLD/token */
  token?: string | undefined
  /** file holding the token */
  tokenFile?: string | undefined
  /**
   * give up on a request after this long (default 90 s: longer than the
   * longest claim long-poll, 60 s), so a daemon that stopped answering
   * cannot hang the executor
   */
  timeoutMs?: number | undefined
}

export class Daemon {
  readonly world: string | undefined
  private readonly fixedURL: string | undefined
  private tokenValue: string | undefined
  private readonly tokenFile: string | undefined
  private readonly timeoutMs: number
  private cachedURL: string | undefined

  constructor ({ world, url, token, tokenFile, timeoutMs = 90000 }: DaemonOptions) {
    if (!url && !world) {
      throw new Error('give a world directory or a daemon URL')
    }
    this.world = world
    this.fixedURL = url ? url.replace(/\/+$/, '') : undefined
    this.tokenValue = token
    this.tokenFile = tokenFile ?? (world ? join(world, 'token') : undefined)
    this.timeoutMs = timeoutMs
    this.cachedURL = undefined
  }

  baseURL (): string {
    if (this.fixedURL) {
      return this.fixedURL
    }
    if (this.cachedURL) {
      return this.cachedURL
    }
    const file = join(this.world ?? '', 'daemon.json')
    let info: JSONValue
    try {
      info = parseJSON(readFileSync(file))
    } catch (e) {
      throw new UnreachableError(`no daemon for ${this.world} (start \`aosd serve --world ${this.world}\`): ${errorMessage(e)}`, e)
    }
    const addr = member(info, 'addr')
    if (typeof addr !== 'string') {
      throw new UnreachableError(`${file}: no "addr"`)
    }
    this.cachedURL = 'http://' + addr
    return this.cachedURL
  }

  token (): string {
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
   * statuses throw DaemonError, failed connections UnreachableError. The
   * answer is a JSONValue: what it holds is for the caller to check.
   */
  async post (path: string, body: string, signal?: AbortSignal): Promise<JSONValue> {
    const what = `POST ${path}`
    const url = this.baseURL() + path
    let resp: Response
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
      throw new UnreachableError(`${what}: ${url}: ${String((e instanceof Error ? e.cause : undefined) ?? e)}`, e)
    }
    let text: string
    try {
      text = await resp.text()
    } catch (e) {
      if (signal?.aborted) {
        throw e
      }
      this.cachedURL = undefined
      throw new UnreachableError(`${what}: reading the answer: ${errorMessage(e)}`, e)
    }
    let parsed: JSONValue | undefined
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
    const err = member(parsed, 'error')
    const code = member(err, 'code')
    const message = member(err, 'message')
    throw new DaemonError(what, resp.status, typeof code === 'string' ? code : '',
      typeof message === 'string' ? message : text.slice(0, 500))
  }
}

/** The message of whatever was thrown. */
export function errorMessage (e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}
