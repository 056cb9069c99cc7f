// @ts-check
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
import { TransientError } from './executor.js'

export const CHARGE_EFFECT = 'com.example/payment.charge@1'

/**
 * Reads com.example/ChargeParams@1. The daemon validated the params against
 * that schema before the intent existed, so a failure here means the
 * manifest and this executor disagree: it is not retried.
 * @param {any} p
 */
export function chargeParams (p) {
  const isInt = (/** @type {unknown} */ v) => (typeof v === 'number' && Number.isSafeInteger(v)) || typeof v === 'bigint'
  if (p === null || typeof p !== 'object' || Array.isArray(p)) {
    throw new Error(`params: want an object ({order_id, amount_cents, customer}), got ${JSON.stringify(p)}`)
  }
  if (typeof p.order_id !== 'string' || p.order_id === '') {
    throw new Error('params: /order_id: want a non-empty string')
  }
  if (!isInt(p.amount_cents) || p.amount_cents < 1) {
    throw new Error('params: /amount_cents: want an integer of at least 1')
  }
  if (typeof p.customer !== 'string') {
    throw new Error('params: /customer: want a string')
  }
  return { orderId: p.order_id, amountCents: /** @type {number | bigint} */ (p.amount_cents), customer: p.customer }
}

/**
 * The stand-in payment service: charges above declineOver cents are
 * declined, others succeed; with failAttempts > 0 the first failAttempts
 * attempts of every charge fail as a provider outage would (transiently),
 * to show retries, frames and, past the policy's attempts, an error
 * receipt.
 * @param {{declineOver: bigint, failAttempts: number}} cfg
 * @returns {import('./executor.js').Perform}
 */
export function standInPayments ({ declineOver, failAttempts }) {
  return async (it, attempt) => {
    const { orderId, amountCents } = chargeParams(it.params)
    if (attempt <= failAttempts) {
      throw new TransientError(`payment provider unavailable (simulated outage of ${failAttempts} attempt(s))`)
    }
    const status = BigInt(amountCents) > declineOver ? 'declined' : 'succeeded'
    return {
      status: 'ok',
      payload: { charge_id: 'ch_' + it.hash.slice('sha256:'.length, 'sha256:'.length + 12), status },
      summary: `order ${orderId}: ${amountCents} cents ${status} on attempt ${attempt}`
    }
  }
}
