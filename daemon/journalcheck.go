package daemon

import (
	"context"
	"encoding/json"
	"net/http"

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

// checkJournal checks a journal, reading snapshot objects from objects.
func checkJournal(ctx context.Context, j journalcheck.Journal, objects func(schemas.Hash) ([]byte, error)) (*JournalCheck, error) {
	rep, err := journalcheck.Check(ctx, j, journalcheck.Options{Objects: objects})
	if err != nil {
		return nil, AsError(err, "journal check")
	}
	return JournalCheckOf(rep), nil
}

// CheckJournal implements Backend: the open world's journal as it is
// durable now (records appended meanwhile are not read).
func (l *Local) CheckJournal(ctx context.Context) (*JournalCheck, error) {
	return checkJournal(ctx, l.W.Journal(), l.W.CAS().Get)
}

// CheckJournal implements Backend.
func (c *Client) CheckJournal(ctx context.Context) (*JournalCheck, error) {
	var out JournalCheck
	if err := c.call(ctx, "GET", "/v1/journal/check", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// journalCheckRoute is GET /v1/journal/check: 200 with the report whether
// or not a rule is broken (see ok).
func (s *Server) journalCheckRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "journal check", body{}, func() (any, error) { return s.Backend.CheckJournal(r.Context()) })
}

// CheckJournal checks the journal of the world in d: through its daemon
// when one serves it (as Connect finds it), else on the store alone. It
// does not open the world: opening replays the journal, and a journal that
// breaks a rule may not replay, while the check must still say what is
// wrong with it.
func CheckJournal(ctx context.Context, d Dir, opt ConnectOptions) (*JournalCheck, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	found, err := findDaemon(ctx, d, opt)
	if err != nil {
		return nil, err
	}
	if found.client != nil {
		return found.client.CheckJournal(ctx)
	}
	st, err := openStoreAt(d.Store(), opt.Store)
	if err != nil {
		return nil, found.openError(d, opt, err)
	}
	defer st.close()
	return checkJournal(ctx, st.db.Journal(), st.db.CAS().Get)
}
