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
	if err := k.Add("timer", priv.Public().(ed25519.PublicKey), []string{"com.test/*"}); err != nil {
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
		srs[i] = Sign(priv, Receipt{Intent: schemas.HashBytes([]byte(fmt.Sprint(i))), Effect: "com.test/timer.set@1", Executor: "timer",
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

func checkBody(t *testing.T, r Receipt) {
	t.Helper()
	want, err := schemas.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Body(); string(got) != string(want) {
		t.Fatalf("hand-written body %x\nlibrary body      %x", got, want)
	}
	domain := Domain
	if r.World == "" {
		domain = DomainV1
	}
	if got := SigningMessage(&r); string(got) != domain+string(want) {
		t.Fatalf("signing message %x", got)
	}
}

// The hand-written encoder gives the library's canonical bytes at every
// head length (1, 2, 3 and 5 byte heads for lengths and attempts).
func TestBodyMatchesLibrary(t *testing.T) {
	sizes := []int{0, 1, 23, 24, 255, 256, 65535, 65536}
	for _, n := range sizes {
		s := string(make([]byte, n))
		for _, a := range []uint64{0, 23, 24, 255, 256, 65536, 1 << 32, 1<<64 - 1} {
			checkBody(t, Receipt{Intent: schemas.HashBytes([]byte(s)), Effect: "com.test/timer.set@1" + s, Executor: s,
				Status: StatusTimeout, Payload: []byte(s), Attempt: a, IssuerRef: s, World: s})
			checkBody(t, Receipt{Intent: schemas.HashBytes([]byte(s)), Effect: s, Executor: s, Status: StatusOK, Payload: []byte(s), Attempt: a,
				World: "world:" + s})
		}
	}
}

func FuzzBody(f *testing.F) {
	f.Add("com.test/timer.set@1", "aos/builtin", "ok", []byte{0xa0}, uint64(1), "", []byte("i"), "world:1")
	f.Add("", "", "", []byte(nil), uint64(1<<40), "ref", []byte(""), "")
	f.Fuzz(func(t *testing.T, effect, executor, status string, payload []byte, attempt uint64, ref string, intent []byte, world string) {
		checkBody(t, Receipt{Intent: schemas.HashBytes(intent), Effect: effect, Executor: executor, Status: Status(status),
			Payload: payload, Attempt: attempt, IssuerRef: ref, World: world})
	})
}
