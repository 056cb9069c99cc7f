package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/kernel"
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
	}{
		{"clients=64/events_per_call=1", 64, 1},
		{"clients=8/events_per_call=100", 8, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b, 1, true)
			mustApply(b, h, counterManifest)
			const keys = 10000
			evs := make([]json.RawMessage, keys)
			for i := range evs {
				evs[i] = json.RawMessage(fmt.Sprintf(`{"key":"key-%05d","by":1}`, i))
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
		})
	}
}
