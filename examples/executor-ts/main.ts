#!/usr/bin/env node
/**
 * An external executor for aos in TypeScript: the payment service of
 * examples/manifests/orders, the twin of examples/executor (Go), speaking
 * the executor protocol of docs/API.md over HTTP:
 *
 *  1. make an ed25519 key and have the world trust its public half for the
 *     effect it serves (`aosd keys add payments KEY.pub.pem --effects
 *     com.example/payment.charge@1`);
 *  2. long-poll POST /v1/effects/claim;
 *  3. do the work, idempotently per intent hash, retrying transient
 *     failures as the effect's retry policy says (a signed frame per retry);
 *  4. POST /v1/receipts with a receipt signed over its canonical CBOR body.
 *
 * Usage (with `aosd serve --world /tmp/w` running), from this directory
 * after `npm ci && npm run build` (tsc compiles it to dist/):
 *
 *   node dist/main.js --world /tmp/w --key /tmp/payments-ts.key
 *
 * The first run creates the key files and prints the command that trusts
 * them. See README.md.
 */
import type { KeyObject } from 'node:crypto'
import { parseArgs } from 'node:util'
import { Daemon, errorMessage } from './lib/daemon.js'
import { Executor } from './lib/executor.js'
import { CHARGE_EFFECT, standInPayments } from './lib/payments.js'
import { createKeyFiles, keyId, readPrivateKeyFile } from './lib/receipts.js'

const usage = `usage: node dist/main.js [flags]

  --world DIR          world directory: reads DIR/daemon.json and DIR/token (default $AOS_WORLD, else .aos)
  --url URL            the daemon's base URL, instead of DIR/daemon.json
  --token-file FILE    the bearer token's file, instead of DIR/token
  --key FILE           private key (PKCS #8 PEM); created with FILE.pub.pem if missing (default payments.key)
  --name NAME          executor name the key is trusted under (default payments)
  --effect EFFECT      effect to serve (default ${CHARGE_EFFECT})
  --decline-over N     decline charges above N cents (default 100000)
  --fail-attempts N    the stand-in provider fails the first N attempts of every charge (default 0)
  --max N              intents per claim (default 16)
  --lease-ms MS        lease per claim (default 30000)
  --wait-ms MS         long-poll for work up to MS (default 20000)
  --once               exit after the first claim that got work
  -h, --help           this text
`

function usageError (msg: string): never {
  process.stderr.write(`executor-ts: ${msg}\n\n${usage}`)
  process.exit(2)
}

function int (flag: string, s: string, min: number): number {
  if (!/^[0-9]+$/.test(s) || !Number.isSafeInteger(Number(s)) || Number(s) < min) {
    usageError(`${flag} ${JSON.stringify(s)}: want an integer of at least ${min}`)
  }
  return Number(s)
}

const options = {
  world: { type: 'string', default: process.env['AOS_WORLD'] || '.aos' },
  url: { type: 'string' },
  'token-file': { type: 'string' },
  key: { type: 'string', default: 'payments.key' },
  name: { type: 'string', default: 'payments' },
  effect: { type: 'string', default: CHARGE_EFFECT },
  'decline-over': { type: 'string', default: '100000' },
  'fail-attempts': { type: 'string', default: '0' },
  max: { type: 'string', default: '16' },
  'lease-ms': { type: 'string', default: '30000' },
  'wait-ms': { type: 'string', default: '20000' },
  once: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false }
} as const

let args
try {
  args = parseArgs({ options, strict: true, allowPositionals: false }).values
} catch (e) {
  usageError(errorMessage(e))
}
if (args.help) {
  process.stdout.write(usage)
  process.exit(0)
}
if (!/^[0-9]+$/.test(args['decline-over'])) {
  usageError(`--decline-over ${JSON.stringify(args['decline-over'])}: want a non-negative integer`)
}
const declineOver = BigInt(args['decline-over'])
const failAttempts = int('--fail-attempts', args['fail-attempts'], 0)
const max = int('--max', args.max, 1)
const leaseMs = int('--lease-ms', args['lease-ms'], 1)
const waitMs = int('--wait-ms', args['wait-ms'], 0)

const log = (line: string): void => { process.stderr.write(`executor-ts: ${line}\n`) }

let key: KeyObject
try {
  key = readPrivateKeyFile(args.key)
} catch (e) {
  if (!(e instanceof Error && 'code' in e && e.code === 'ENOENT')) {
    log(`${args.key}: ${errorMessage(e)}`)
    process.exit(1)
  }
  key = createKeyFiles(args.key)
  process.stdout.write(`created ${args.key} and ${args.key}.pub.pem (key id ${keyId(key)}); trust it with:\n` +
    `  aosd keys add ${args.name} ${args.key}.pub.pem --effects ${args.effect} --world ${args.world}\n`)
  process.exit(0)
}

const daemon = new Daemon({ world: args.world, url: args.url, tokenFile: args['token-file'] })
const executor = new Executor({
  daemon,
  key,
  name: args.name,
  effect: args.effect,
  perform: standInPayments({ declineOver, failAttempts }),
  log,
  max,
  leaseMs,
  waitMs
})

const stop = new AbortController()
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    log(`${sig}: stopping (intents claimed and not settled are claimable again when their lease ends)`)
    stop.abort()
  })
}
log(`serving ${args.effect} as ${args.name} (key ${keyId(key)}) for ${args.url ?? args.world}`)
try {
  await executor.run(stop.signal, { once: args.once })
} catch (e) {
  log(errorMessage(e))
  process.exit(1)
}
