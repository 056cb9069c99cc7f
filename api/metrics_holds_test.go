package api_test

import (
	"testing"

	"github.com/aos-kernel/aos/api"
)

// TestMetricsCountSnapshotHolds: the daemon's observer hears the loop hold
// for a snapshot (kernel.TailObserver) and counts it in
// aos_snapshot_holds_total (docs/operations.md).
func TestMetricsCountSnapshotHolds(t *testing.T) {
	m := api.NewMetrics()
	m.SnapshotHolding(100_000, 42)
	m.SnapshotHolding(100_003, 42)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "aos_snapshot_holds_total" {
			if got := mf.GetMetric()[0].GetCounter().GetValue(); got != 2 {
				t.Fatalf("aos_snapshot_holds_total = %v after two holds, want 2", got)
			}
			return
		}
	}
	t.Fatal("aos_snapshot_holds_total is not registered")
}
