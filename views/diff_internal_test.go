package views

import (
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// TestStateDiffKeepsLargeIntegers: a state's nanosecond time (above 2^53)
// comes through the diff with every digit.
func TestStateDiffKeepsLargeIntegers(t *testing.T) {
	from := schemas.MustMarshal(map[string]any{"status": "scheduled", "due_ns": uint64(1795850120531457415)})
	to := schemas.MustMarshal(map[string]any{"status": "fired", "due_ns": uint64(1795850120531457415), "fired_at_ns": uint64(1795850120532955617)})
	d, err := stateDiff(from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"value":1795850120532955617,"op":"add","path":"/fired_at_ns"},{"value":"fired","op":"replace","path":"/status"}]`
	if string(d) != want {
		t.Errorf("diff %s\nwant %s", d, want)
	}
}
