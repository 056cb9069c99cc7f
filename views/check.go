package views

import (
	"context"
	"encoding/json"

	"github.com/aos-kernel/aos/journalcheck"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// JournalCheck is `aosd journal check --json` and the answer of GET
// /v1/journal/check: the journal's invariants checked (package
// journalcheck; docs/journal-check.md lists the rules). Its shape is
// stable: tools such as crash harnesses read it.
type JournalCheck struct {
	// OK: no rule is broken.
	OK bool `json:"ok"`
	// Records is how many records were checked.
	Records uint64 `json:"records"`
	// First is the journal's first seq (above 1 when retention dropped a
	// prefix); From and To the first and last seq checked (To is 0 when
	// nothing was checked).
	First uint64 `json:"first"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	// Snapshot is the snapshot record whose state the check started from,
	// on a journal retention cut; 0 when it checked from genesis.
	Snapshot uint64 `json:"snapshot"`
	// Violations, ordered by seq, then rule: at most
	// journalcheck.DefaultMaxViolations; Omitted counts the rest.
	Violations []JournalViolation `json:"violations"`
	Omitted    int                `json:"omitted"`
}

// JournalViolation is one broken rule.
type JournalViolation struct {
	Seq  uint64 `json:"seq"`
	Rule string `json:"rule"`
	// Workflow and Key name the instance concerned: "" and null when the
	// rule concerns none (a seq gap, a manifest, an intent never opened).
	Workflow string          `json:"workflow"`
	Key      json.RawMessage `json:"key"`
	Detail   string          `json:"detail"`
}

// JournalCheckOf renders a journalcheck report.
func JournalCheckOf(rep *journalcheck.Report) *JournalCheck {
	out := &JournalCheck{OK: rep.OK(), Records: rep.Records, First: rep.First, From: rep.From, To: rep.To,
		Snapshot: rep.Snapshot, Violations: make([]JournalViolation, len(rep.Violations)), Omitted: rep.Omitted}
	for i, v := range rep.Violations {
		key := json.RawMessage("null")
		if v.Workflow != "" {
			key = records.KeyJSON(v.Key)
		}
		out.Violations[i] = JournalViolation{Seq: v.Seq, Rule: v.Rule, Workflow: v.Workflow, Key: key, Detail: v.Detail}
	}
	return out
}

// CheckJournal checks a journal, reading snapshot objects from objects
// (journalcheck.Check), and renders the report.
func CheckJournal(ctx context.Context, j journalcheck.Journal, objects func(schemas.Hash) ([]byte, error)) (*JournalCheck, error) {
	rep, err := journalcheck.Check(ctx, j, journalcheck.Options{Objects: objects})
	if err != nil {
		return nil, err
	}
	return JournalCheckOf(rep), nil
}
