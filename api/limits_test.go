package api

import (
	"strings"
	"testing"
)

// TestParseLimits: unknown names and negative values are refused by name.
func TestParseLimits(t *testing.T) {
	if _, err := ParseLimits([]byte(`{"max_stepz_per_input": 3}`)); err == nil || !strings.Contains(err.Error(), "max_stepz_per_input") {
		t.Fatalf("unknown limit: %v", err)
	}
	if _, err := ParseLimits([]byte(`{"max_effects": -2}`)); err == nil || !strings.Contains(err.Error(), "max_effects") {
		t.Fatalf("negative limit: %v", err)
	}
	l, err := ParseLimits([]byte(`{"max_steps_per_input": 3}`))
	if err != nil || l.MaxStepsPerInput != 3 {
		t.Fatalf("%+v %v", l, err)
	}
}
