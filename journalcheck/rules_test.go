package journalcheck_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/journalcheck"
)

// TestRulesDocumented: docs/journal-check.md explains every rule, in the
// order Rules lists them, and no other.
func TestRulesDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/journal-check.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	if want := journalcheck.Rules(); !slices.Equal(documented, want) {
		t.Fatalf("docs/journal-check.md's rule table lists %v, want %v", documented, want)
	}
}
