package kernel

import (
	"sort"

	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// OpenIntent is an effect intent released to executors. It is only ever
// released after the journal frame that records it is durable.
type OpenIntent struct {
	// World is the world's identity, which a receipt or frame for this
	// intent must name. It is the world's, not the intent's: an intent
	// opened before the world had an identity has none in its hash, and a
	// receipt for it names the world all the same.
	World          string
	Hash           schemas.Hash
	Effect         string
	Params         []byte // canonical CBOR
	OriginWorkflow string
	OriginKey      []byte
	IssuerRef      string
	EmittedAt      uint64
	Retry          *manifest.RetryPolicy
	// LastFrame is the seq of the last stream frame journaled for the
	// intent (0: none). The built-in executors report each failed attempt
	// as a frame whose seq is its attempt number, so an intent published
	// again after a restart goes on from attempt LastFrame+1 rather than
	// counting from 1 again.
	LastFrame uint64
}

// Publisher receives durable work for executors: intents opened and intents
// settled, in journal order. Calls come from the committer goroutine after
// the records are durable, and from Open for intents still in flight; they
// must not block.
type Publisher interface {
	Publish(opened []OpenIntent, settled []schemas.Hash)
}

// QueueReporter is optionally implemented by a Publisher that can say how
// many published intents wait for an executor; Status reports the count as
// QueuedEffects. It lives outside the deterministic core and is never
// journaled.
type QueueReporter interface {
	Queued() int
}

type nopPublisher struct{}

func (nopPublisher) Publish([]OpenIntent, []schemas.Hash) {}

func (st *state) openIntent(it *records.IntentRec) OpenIntent {
	oi := OpenIntent{World: st.world, Hash: it.Hash, Effect: it.Effect, Params: it.Params, OriginWorkflow: it.OriginWorkflow,
		OriginKey: it.OriginKey, IssuerRef: it.IssuerRef, EmittedAt: it.EmittedAt, LastFrame: st.frameSeq[it.Hash]}
	if def := st.effectDef(it); def != nil {
		oi.Retry = def.Retry
	}
	return oi
}

// pendingIntents lists every intent in flight, oldest first.
func (st *state) pendingIntents() []OpenIntent {
	out := make([]OpenIntent, 0, len(st.inflight))
	for _, it := range st.inflight {
		out = append(out, st.openIntent(it))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].EmittedAt != out[j].EmittedAt {
			return out[i].EmittedAt < out[j].EmittedAt
		}
		return string(out[i].Hash[:]) < string(out[j].Hash[:])
	})
	return out
}
