package receipts

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// Receipts that are waiting when a worker comes free are verified as one
// batch, not one by one.
func TestVerifierBatchesWhatIsWaiting(t *testing.T) {
	seed := sha256.Sum256([]byte("batch"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	k := NewKeyring()
	if err := k.Add("timer", priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	v := newVerifier(k) // no workers yet: requests queue up
	const n = 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []error
	queued := make(chan struct{}, n)
	srs := make([]SignedReceipt, n)
	for i := range srs {
		srs[i] = Sign(priv, Receipt{Intent: schemas.HashBytes([]byte(fmt.Sprint(i))), Effect: "sys/timer.set@1", Executor: "timer",
			Status: StatusOK, Payload: schemas.MustMarshal(map[string]any{"i": uint64(i)}), Attempt: 1})
	}
	for i := range srs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &verifyReq{sr: &srs[i], done: make(chan struct{})}
			v.reqs <- r
			queued <- struct{}{}
			<-r.done
			mu.Lock()
			got = append(got, r.res.Err)
			mu.Unlock()
		}()
	}
	for range n {
		<-queued
	}
	v.start(1)
	wg.Wait()
	v.Close()
	for _, err := range got {
		if err != nil {
			t.Fatal(err)
		}
	}
	if b, r := v.Stats(); b != 1 || r != n {
		t.Fatalf("%d batches for %d receipts, want 1 for %d", b, r, n)
	}
}
