package kernel_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// BenchmarkKeyedCounter measures events/s end to end: JSON ingress,
// validation, stamping, routing, a builtin keyed-counter step over 10,000
// keys, and the durable group commit, with concurrent clients. Run with
//
//	go test ./kernel -run '^$' -bench KeyedCounter -benchtime 200000x
func BenchmarkKeyedCounter(b *testing.B) {
	for _, c := range []struct {
		name             string
		clients, perCall int
		unique           bool
	}{
		{"clients=64/events_per_call=1", 64, 1, false},
		{"clients=8/events_per_call=100", 8, 100, false},
		{"clients=8/events_per_call=100/unique_states", 8, 100, true},
		{"clients=32/events_per_call=100/unique_states", 32, 100, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var fl flushStats
			h := newHarnessWith(b, 1, true, func(h *harness) {
				h.extra = func(cfg *kernel.Config) { cfg.Observer = &fl }
			})
			if c.unique {
				// Every state also names its key, so no two states are
				// equal and no validation result is ever reused.
				h.builtins.MustRegister("test/keyedcounter", "test/keyedcounter@1", "step", keyedCounter)
				mustApply(b, h, strings.NewReplacer(`"builtin":"test/counter","identity":"test/counter@1"`, `"builtin":"test/keyedcounter","identity":"test/keyedcounter@1"`,
					`"properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false`,
					`"properties":{"count":{"type":"integer"},"key":{"type":"string"}},"required":["count","key"],"additionalProperties":false`).Replace(counterManifest))
			} else {
				mustApply(b, h, counterManifest)
			}
			const keys = 10000
			evs := make([][]byte, keys)
			for i := range evs {
				evs[i] = []byte(fmt.Sprintf(`{"key":"key-%05d","by":1}`, i))
			}
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			done := make(chan error, c.clients)
			for g := 0; g < c.clients; g++ {
				go func() {
					batch := make([]kernel.Event, 0, c.perCall)
					for {
						n := next.Add(int64(c.perCall)) - int64(c.perCall)
						if n >= int64(b.N) {
							done <- nil
							return
						}
						batch = batch[:0]
						for i := n; i < n+int64(c.perCall) && i < int64(b.N); i++ {
							batch = append(batch, kernel.Event{Schema: "com.test/CountEvent@1", JSON: evs[i%keys]})
						}
						if _, err := h.w.Submit(context.Background(), batch...); err != nil {
							done <- err
							return
						}
					}
				}()
			}
			for g := 0; g < c.clients; g++ {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
			if n := fl.flushes.Load(); n > 0 {
				b.ReportMetric(float64(fl.records.Load())/float64(n), "records/flush")
				b.ReportMetric(float64(fl.nanos.Load())/float64(n)/1e3, "µs/flush")
			}
		})
	}
}

// flushStats counts group commits, to show how many records each fsync
// carries and what it costs.
type flushStats struct {
	flushes, records, nanos atomic.Int64
}

func (*flushStats) Ingested(int)                                  {}
func (*flushStats) Stepped(string, time.Duration, bool)           {}
func (*flushStats) Snapshotted(time.Duration, time.Duration, int) {}
func (f *flushStats) Flushed(n int, d time.Duration, _ error) {
	f.flushes.Add(1)
	f.records.Add(int64(n))
	f.nanos.Add(int64(d))
}

func keyedCounter(in *modules.Input) (*modules.Output, error) {
	ev := decodeCount(in.Event.Value)
	var count int64
	if in.State != nil {
		count = decodeCount(in.State).Count
	}
	return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": count + ev.By, "key": ev.Key})}, nil
}
