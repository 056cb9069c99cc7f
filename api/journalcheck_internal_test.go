package api

import (
	"slices"
	"testing"

	"github.com/aos-kernel/aos/journalcheck"
)

// TestJournalCheckDocumentsRules: the rule enum of docs/openapi.json is
// exactly journalcheck.Rules().
func TestJournalCheckDocumentsRules(t *testing.T) {
	doc := loadOpenAPI(t)
	v := lookupPointer(doc, "/components/schemas/JournalViolation/properties/rule/enum")
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("JournalViolation.rule has no enum: %v", v)
	}
	var got []string
	for _, r := range list {
		got = append(got, r.(string))
	}
	if want := journalcheck.Rules(); !slices.Equal(got, want) {
		t.Fatalf("documented rules %v, want %v", got, want)
	}
}
