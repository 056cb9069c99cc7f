package api_test

import (
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
)

// TestTokenSetGrace: after a rotation with a grace the replaced token is
// accepted until the grace ends and not after; a later rotation drops it
// whatever its grace; without a grace only the new token is accepted; an
// empty token is never accepted, nor kept as an old one.
func TestTokenSetGrace(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	s := api.NewTokenSet("one", clock)
	ok := func(tok string, want bool) {
		t.Helper()
		if got := s.Check("Bearer " + tok); got != want {
			t.Errorf("at %s, token %q accepted: %v, want %v", now.Format(time.TimeOnly), tok, got, want)
		}
	}
	ok("one", true)
	ok("two", false)
	if until := s.Rotate("two", time.Minute); !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("grace ends at %s, want a minute from now", until)
	}
	ok("one", true)
	ok("two", true)
	now = now.Add(59 * time.Second)
	ok("one", true)
	now = now.Add(time.Second)
	ok("one", false) // the grace is over
	ok("two", true)

	s.Rotate("three", time.Hour)
	s.Rotate("four", time.Hour) // "two" is dropped: one token back at most
	ok("two", false)
	ok("three", true)
	ok("four", true)
	if until := s.Rotate("five", 0); !until.IsZero() {
		t.Fatalf("no grace, yet the old token ends at %s", until)
	}
	ok("four", false)
	ok("three", false)
	ok("five", true)
	if s.Current() != "five" {
		t.Fatalf("current %q", s.Current())
	}

	empty := api.NewTokenSet("", clock)
	if empty.Check("Bearer ") || empty.Check("") {
		t.Error("an empty token was accepted")
	}
	empty.Rotate("six", time.Hour)
	if empty.Check("Bearer ") {
		t.Error("the empty token was kept for a grace")
	}
}
