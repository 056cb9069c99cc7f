// Package effects performs the effects a world admits: it receives durable
// intents from the kernel (kernel.Publisher), runs the built-in executors
// (sys/timer.set@1, sys/http.request@1 and @2, sys/blob.put@1, sys/blob.get@1),
// leases the other intents to external executors that claim them over the
// HTTP API, retries transient failures with capped exponential backoff as the
// effect's retry policy says, and returns signed receipts to the kernel.
//
// It lives outside the deterministic core: it may read the wall clock, sleep
// and do I/O. Nothing it does reaches the journal except through the kernel's
// receipt and frame admission, which verifies signatures and fences
// duplicates. So a crash here loses nothing: intents still in flight are
// published again when the world reopens, and a receipt the kernel already
// settled is dropped, never delivered twice.
//
// Attempts: each failed attempt that will be retried is reported as a stream
// frame ({attempt, error, retry_in_ms}), so attempts show in `aosd trace`.
// An AttemptExecutor (sys/http.request@2) retries by the call's own policy
// and journals a frame ({attempt, last_error?, waited_ms?, resumed?})
// before each attempt is sent instead. Either way a frame's seq is its
// attempt's number, and an intent published again after a restart goes on
// from the last one journaled (kernel.OpenIntent.LastFrame), so a request
// re-sent after a crash is not counted as attempt 1 again.
package effects
