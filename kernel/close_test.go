package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// TestClosedWorldRefuses: once Close has returned, every request is refused
// with ErrClosed and journals nothing, and closing again is a no-op.
func TestClosedWorldRefuses(t *testing.T) {
	h := newHarness(t, 1, false)
	mustApply(t, h, counterManifest)
	if _, err := h.send("com.test/CountEvent@1", `{"key":"a","by":1}`); err != nil {
		t.Fatal(err)
	}
	height := h.w.Journal().Height()
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.send("com.test/CountEvent@1", `{"key":"a","by":1}`); !errors.Is(err, kernel.ErrClosed) {
		t.Errorf("submit after close: %v, want ErrClosed", err)
	}
	if _, err := h.w.Status(ctx); !errors.Is(err, kernel.ErrClosed) {
		t.Errorf("status after close: %v, want ErrClosed", err)
	}
	if err := h.w.Usable(); !errors.Is(err, kernel.ErrClosed) {
		t.Errorf("usable after close: %v, want ErrClosed", err)
	}
	if err := h.w.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if got := h.w.Journal().Height(); got != height {
		t.Errorf("journal height %d after refused requests, want %d", got, height)
	}
}

// TestCloseRacesSenders: requests sent while Close runs are either taken,
// answered and durable, or refused with ErrClosed; no sender sees anything
// else, and every event journaled was acknowledged to its sender. Run under
// -race, it also shows the closed state is read and written without a race.
func TestCloseRacesSenders(t *testing.T) {
	const senders = 8
	for round := range 10 {
		h := newHarness(t, uint64(round)+1, false)
		mustApply(t, h, counterManifest)
		w := h.w
		base := w.Journal().Height()
		acked := make([][]uint64, senders)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					seqs, err := w.Submit(context.Background(), kernel.Event{Schema: "com.test/CountEvent@1",
						JSON: fmt.Appendf(nil, `{"key":"k%d","by":1}`, i)})
					if err != nil {
						if !errors.Is(err, kernel.ErrClosed) {
							t.Errorf("round %d: sender %d: %v, want ErrClosed", round, i, err)
						}
						return
					}
					acked[i] = append(acked[i], seqs[0])
				}
			}()
		}
		// Close once the senders are under way: some of their events durable.
		if _, err := w.Journal().Wait(context.Background(), base+4*senders); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		journaled := map[uint64]string{} // seq -> key of each ingress event
		err := w.Journal().Read(base+1, func(r journal.Record) (bool, error) {
			if r.Kind != journal.KindEvent {
				return true, nil
			}
			var ev records.EventRec
			if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
				return false, err
			}
			if ev.Origin == nil {
				var v struct {
					Key string `cbor:"key"`
				}
				if err := schemas.UnmarshalTrusted(ev.Value, &v); err != nil {
					return false, err
				}
				journaled[r.Seq] = v.Key
			}
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, seqs := range acked {
			n += len(seqs)
			for _, s := range seqs {
				if k := journaled[s]; k != fmt.Sprintf("k%d", i) {
					t.Errorf("round %d: sender %d was answered seq %d, which the journal holds as %q", round, i, s, k)
				}
			}
		}
		if n != len(journaled) {
			t.Errorf("round %d: %d events journaled, %d acknowledged", round, len(journaled), n)
		}
		if n < senders {
			t.Errorf("round %d: %d events acknowledged before close, want at least %d", round, n, senders)
		}
	}
}
