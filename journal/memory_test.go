package journal_test

import (
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// TestMemory holds the in-memory journal to the contract every backend keeps.
func TestMemory(t *testing.T) {
	journaltest.Run(t, func(*testing.T) journaltest.Journal { return journal.NewMemory() })
}
