package loadgen

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// The orders example (examples/manifests/orders): the effect mix's load.
// Each event creates its own order, whose workflow emits a charge (an
// external effect bench serves) and an expiry timer (15 minutes: it stays
// open through the run).
const (
	OrderSchema   = "com.example/OrderCreated@1"
	OrderWorkflow = "com.example/order.step@1"
	ChargeEffect  = "com.example/payment.charge@1"
)

// Receipts is the effect mix's receipt round trip: POST /v1/receipts of a
// signed receipt until its answer, for the measured events' charges.
type Receipts struct {
	Receipts   int     `json:"receipts"`
	Seconds    float64 `json:"seconds"` // from the measured load's start to the last measured receipt's answer
	PerSecond  float64 `json:"receipts_per_second"`
	Latency    Latency `json:"latency_ms"`
	Executor   string  `json:"executor"`
	ClaimCalls int     `json:"claims"`
}

// executor claims the charges and posts signed receipts for them, as an
// external executor does, with a key it trusts through POST /v1/keys.
type executor struct {
	g     *gen
	name  string
	keyID string
	priv  ed25519.PrivateKey

	total    int // charges to settle: one per event, warm-up included
	settled  atomic.Int64
	claims   atomic.Int64
	measured atomic.Bool // set once the measured load starts
	t0       time.Time

	mu   sync.Mutex
	lat  []time.Duration // measured orders' receipts
	last time.Time       // the last measured receipt's answer
}

// orderIndex is the event index of an order id bench made, or -1.
func (g *gen) orderIndex(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, g.c.KeyPrefix))
	if err != nil || !strings.HasPrefix(id, g.c.KeyPrefix) {
		return -1
	}
	return n
}

// newExecutor makes a key and has the world trust it for the charge.
func (g *gen) newExecutor(ctx context.Context, total int) (*executor, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	name := "bench-" + strings.TrimRight(g.c.KeyPrefix, "-.")
	req, _ := json.Marshal(map[string]any{"name": name, "effects": []string{ChargeEffect},
		"public_key": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))})
	b, status, err := g.do(ctx, "POST", "/v1/keys", req)
	if err != nil {
		return nil, err
	}
	var k struct {
		ID string `json:"id"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &k) != nil || k.ID == "" {
		return nil, fmt.Errorf("POST /v1/keys (the executor's key): HTTP %d: %s", status, strings.TrimSpace(string(b)))
	}
	return &executor{g: g, name: name, keyID: k.ID, priv: priv, total: total}, nil
}

// forget removes the executor's key from the world.
func (e *executor) forget(ctx context.Context) error {
	b, status, err := e.g.do(ctx, "DELETE", "/v1/keys/"+url.PathEscape(e.keyID), nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("DELETE /v1/keys/%s: HTTP %d: %s", e.keyID, status, strings.TrimSpace(string(b)))
	}
	return nil
}

// run serves charges from workers goroutines until every one is settled,
// ctx ends, or a request fails (the error).
func (e *executor) run(ctx context.Context, workers int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && int(e.settled.Load()) < e.total {
				if err := e.serveOnce(ctx); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && int(e.settled.Load()) < e.total {
		return err
	}
	return nil
}

type claimedIntent struct {
	Hash   string `json:"hash"`
	Effect string `json:"effect"`
	Params struct {
		OrderID string `json:"order_id"`
	} `json:"params"`
}

// serveOnce claims what is open (waiting briefly for work) and settles it.
func (e *executor) serveOnce(ctx context.Context) error {
	req, _ := json.Marshal(map[string]any{"executor": e.name, "effects": []string{ChargeEffect},
		"max": 64, "lease_ms": 120_000, "wait_ms": 200})
	e.claims.Add(1)
	b, status, err := e.g.do(ctx, "POST", "/v1/effects/claim", req)
	if err != nil {
		return err
	}
	var out struct {
		World   string          `json:"world"` // the world's identity: every receipt names it
		Intents []claimedIntent `json:"intents"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &out) != nil {
		return fmt.Errorf("POST /v1/effects/claim: HTTP %d: %s", status, strings.TrimSpace(string(b)))
	}
	for _, it := range out.Intents {
		if err := e.settle(ctx, out.World, it); err != nil {
			return err
		}
	}
	return nil
}

// settle posts one signed ok receipt: the charge succeeded.
func (e *executor) settle(ctx context.Context, world string, it claimedIntent) error {
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		return fmt.Errorf("claimed intent %q: %w", it.Hash, err)
	}
	payload, err := schemas.Marshal(map[string]any{"charge_id": "ch_" + h.Short(), "status": "succeeded"})
	if err != nil {
		return err
	}
	sr := receipts.Sign(e.priv, receipts.Receipt{World: world, Intent: h, Effect: it.Effect, Executor: e.name,
		Status: receipts.StatusOK, Payload: payload, Attempt: 1})
	body, err := receipts.ToJSON(sr)
	if err != nil {
		return err
	}
	measured := e.measured.Load() && e.g.orderIndex(it.Params.OrderID) >= e.g.c.Warmup
	t := time.Now()
	b, status, err := e.g.do(ctx, "POST", "/v1/receipts", body)
	d := time.Since(t)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("POST /v1/receipts (intent %s, order %s): HTTP %d: %s", it.Hash, it.Params.OrderID, status, strings.TrimSpace(string(b)))
	}
	e.settled.Add(1)
	if measured {
		e.mu.Lock()
		e.lat = append(e.lat, d)
		e.last = time.Now()
		e.mu.Unlock()
	}
	return nil
}

// report is the receipts' figures.
func (e *executor) report() *Receipts {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &Receipts{Receipts: len(e.lat), Latency: summarize(e.lat), Executor: e.name, ClaimCalls: int(e.claims.Load())}
	if len(e.lat) > 0 {
		r.Seconds = e.last.Sub(e.t0).Seconds()
		r.PerSecond = float64(len(e.lat)) / r.Seconds
	}
	return r
}

// verifyOrders reads every order's cell until it is paid, for up to
// Settle in all: a receipt answered is journaled, and the step that pays
// the order follows it. Every order must end paid.
func (g *gen) verifyOrders(ctx context.Context, v *Verify) error {
	total := g.c.Warmup + g.c.Events
	deadline := time.Now().Add(g.c.Settle)
	for i := 0; i < total; i++ {
		key := g.c.KeyPrefix + strconv.Itoa(i)
		wait := time.Millisecond
		for {
			st, err := g.orderStatus(ctx, key)
			if err != nil {
				return err
			}
			if st == "paid" {
				break
			}
			if st != "awaiting_payment" || time.Now().After(deadline) {
				v.Mismatches = append(v.Mismatches, Mismatch{Key: key, Status: st})
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, 100*time.Millisecond)
		}
	}
	v.Keys = total
	return nil
}

// orderStatus is one order cell's status, "" when there is no cell.
func (g *gen) orderStatus(ctx context.Context, key string) (string, error) {
	path := "/v1/cells/" + url.PathEscape(OrderWorkflow) + "/" + url.PathEscape(strconv.Quote(key))
	b, status, err := g.do(ctx, "GET", path, nil)
	if err != nil {
		return "", err
	}
	if status == http.StatusNotFound {
		return "", nil
	}
	var cell struct {
		State *struct {
			Status string `json:"status"`
		} `json:"state"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &cell) != nil || cell.State == nil {
		return "", fmt.Errorf("GET %s: HTTP %d: not an order cell: %s", path, status, b)
	}
	return cell.State.Status, nil
}

// wait waits for the executor to settle every charge, for up to settle
// after the load; done is run's result.
func (e *executor) wait(done <-chan error, settle time.Duration) error {
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("executor: %w", err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("executor: %d of %d charges settled within --settle %s", e.settled.Load(), e.total, settle)
	}
}
