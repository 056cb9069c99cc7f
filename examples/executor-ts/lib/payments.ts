/**
 * The work for examples/manifests/orders: com.example/payment.charge@1
 * against a stand-in payment service, as examples/executor (Go) does it.
 * Params are com.example/ChargeParams@1 ({order_id, amount_cents,
 * customer}); the receipt is com.example/ChargeReceipt@1 ({charge_id,
 * status: "succeeded" | "declined"}).
 *
 * The charge id is derived from the intent hash, so performing an intent
 * twice (a redelivery after an expired lease) charges once: the hash is the
 * idempotency key a real payment API would take. Amounts are compared
 * exactly (bigints beyond 2^53), because money must not round.
 */
import { type JSONValue, member } from './canonical.js'
import { type Perform, TransientError } from './executor.js'

export const CHARGE_EFFECT = 'com.example/payment.charge@1'

/** com.example/ChargeParams@1, read. */
export interface ChargeParams {
  orderId: string
  /** exact: a bigint beyond 2^53 */
  amountCents: number | bigint
  customer: string
}

/**
 * Reads com.example/ChargeParams@1. The daemon validated the params against
 * that schema before the intent existed, so a failure here means the
 * manifest and this executor disagree: it is not retried.
 */
export function chargeParams (p: JSONValue): ChargeParams {
  const isInt = (v: JSONValue | undefined): v is number | bigint => (typeof v === 'number' && Number.isSafeInteger(v)) || typeof v === 'bigint'
  if (p === null || typeof p !== 'object' || Array.isArray(p)) {
    throw new Error(`params: want an object ({order_id, amount_cents, customer}), got ${typeof p === 'bigint' ? String(p) : JSON.stringify(p)}`)
  }
  const orderId = member(p, 'order_id')
  const amountCents = member(p, 'amount_cents')
  const customer = member(p, 'customer')
  if (typeof orderId !== 'string' || orderId === '') {
    throw new Error('params: /order_id: want a non-empty string')
  }
  if (!isInt(amountCents) || amountCents < 1) {
    throw new Error('params: /amount_cents: want an integer of at least 1')
  }
  if (typeof customer !== 'string') {
    throw new Error('params: /customer: want a string')
  }
  return { orderId, amountCents, customer }
}

/**
 * The stand-in payment service: charges above declineOver cents are
 * declined, others succeed; with failAttempts > 0 the first failAttempts
 * attempts of every charge fail as a provider outage would (transiently),
 * to show retries, frames and, past the policy's attempts, an error
 * receipt.
 */
export function standInPayments ({ declineOver, failAttempts }: { declineOver: bigint, failAttempts: number }): Perform {
  return async (it, attempt) => {
    const { orderId, amountCents } = chargeParams(it.params)
    if (attempt <= failAttempts) {
      throw new TransientError(`payment provider unavailable (simulated outage of ${failAttempts} attempt(s))`)
    }
    const status = BigInt(amountCents) > declineOver ? 'declined' : 'succeeded'
    return {
      status: 'ok' as const,
      payload: { charge_id: 'ch_' + it.hash.slice('sha256:'.length, 'sha256:'.length + 12), status },
      summary: `order ${orderId}: ${amountCents} cents ${status} on attempt ${attempt}`
    }
  }
}
