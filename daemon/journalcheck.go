package daemon

import (
	"context"
	"net/http"

	"github.com/aos-kernel/aos/journalcheck"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// checkJournal checks a journal (views.CheckJournal), reading snapshot
// objects from objects.
func checkJournal(ctx context.Context, j journalcheck.Journal, objects func(schemas.Hash) ([]byte, error)) (*views.JournalCheck, error) {
	out, err := views.CheckJournal(ctx, j, objects)
	if err != nil {
		return nil, AsError(err, "journal check")
	}
	return out, nil
}

// CheckJournal implements Backend: the open world's journal as it is
// durable now (records appended meanwhile are not read).
func (l *Local) CheckJournal(ctx context.Context) (*views.JournalCheck, error) {
	return checkJournal(ctx, l.W.Journal(), l.W.CAS().Get)
}

// CheckJournal implements Backend.
func (c *Client) CheckJournal(ctx context.Context) (*views.JournalCheck, error) {
	var out views.JournalCheck
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
func CheckJournal(ctx context.Context, d Dir, opt ConnectOptions) (*views.JournalCheck, error) {
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
