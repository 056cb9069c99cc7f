package kernel_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
)

// TestLimitsDocumented: docs/limits.md's table lists every limit, with the
// default the code uses, and nothing else.
func TestLimitsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([^|]+) \\|")
	doc := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = parseSize(t, m[1], m[2])
	}
	def := kernel.DefaultLimits().NonZero()
	for _, name := range records.LimitNames() {
		got, ok := doc[name]
		if !ok {
			t.Errorf("limit %s is not in docs/limits.md", name)
			continue
		}
		if got != def[name] {
			t.Errorf("docs/limits.md says %s defaults to %d; the code says %d", name, got, def[name])
		}
		delete(doc, name)
	}
	for name := range doc {
		t.Errorf("docs/limits.md lists %s, which is not a limit", name)
	}
}

// parseSize reads "1 MiB", "64 KiB", "10,000", "86,400 (24 h)".
func parseSize(t *testing.T, name, s string) int {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, " ("); i >= 0 {
		s = s[:i]
	}
	mult := 1
	for suffix, m := range map[string]int{" KiB": 1 << 10, " MiB": 1 << 20} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatalf("docs/limits.md: default of %s: %v", name, err)
	}
	return n * mult
}
