package kernel

import "testing"

// TestSnapshotMaxTailDefaults: the tail bound defaults to twice
// SnapshotEvery, is raised to SnapshotEvery when set below it, and is off
// when either is negative (docs/snapshots.md, "The tail an open replays").
func TestSnapshotMaxTailDefaults(t *testing.T) {
	for _, c := range []struct{ every, maxTail, want int }{
		{0, 0, 2 * DefaultSnapshotEvery},
		{100, 0, 200},
		{100, 150, 150},
		{100, 50, 100},
		{100, -1, -1},
		{-1, 0, -1},
		{-1, 500, -1},
	} {
		got := Config{SnapshotEvery: c.every, SnapshotMaxTail: c.maxTail}.withDefaults().SnapshotMaxTail
		if got != c.want {
			t.Errorf("SnapshotEvery %d, SnapshotMaxTail %d: effective bound %d, want %d", c.every, c.maxTail, got, c.want)
		}
	}
}
