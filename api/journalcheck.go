package api

import (
	"context"
	"net/http"

	"github.com/aos-kernel/aos/views"
)

// CheckJournal implements Reader: the open world's journal as it is
// durable now (records appended meanwhile are not read).
func (l *Local) CheckJournal(ctx context.Context) (*views.JournalCheck, error) {
	out, err := views.CheckJournal(ctx, l.W.Journal(), l.W.CAS().Get)
	if err != nil {
		return nil, AsError(err, "journal check")
	}
	return out, nil
}

// CheckJournal implements Reader.
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
