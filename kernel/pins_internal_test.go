package kernel

import (
	"strings"
	"testing"
)

// TestNotDrainedSaysHowMany: the refusal counts what blocks a retire in
// words that agree with the count.
func TestNotDrainedSaysHowMany(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{1, "1 instance is pinned to it"}, {2, "2 instances are pinned to it"}} {
		e := &NotDrainedError{Name: "t/m", Blockers: make([]Blocker, c.n)}
		if !strings.Contains(e.Error(), c.want) {
			t.Errorf("%d blockers: %q, want it to say %q", c.n, e.Error(), c.want)
		}
	}
}
