package api_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journalcheck"
)

// checkJournal fails the test unless the world's journal keeps every rule
// of the journal check: serveWorld checks each world it serves at cleanup.
func checkJournal(t *testing.T, db *badgerdb.DB) {
	t.Helper()
	rep, err := journalcheck.Check(context.Background(), db.Journal(), journalcheck.Options{Objects: db.CAS().Get})
	if err != nil {
		t.Errorf("journal check: %v", err)
		return
	}
	for _, v := range rep.Violations {
		t.Errorf("journal check: %s", v)
	}
}

// TestJournalCheckRoute: GET /v1/journal/check answers the report of the
// served world's journal, with exactly the documented fields, and the
// Client reads it.
func TestJournalCheckRoute(t *testing.T) {
	s := serveWorld(t, true)
	if code, body := s.post(t, `{"schema":"com.example/OrderCreated@1","value":{"order_id":"o1","amount_cents":100,"customer":"c"}}`); code != 200 {
		t.Fatalf("send: %d %s", code, body)
	}
	code, body := s.do(t, "GET", "/v1/journal/check", "")
	if code != 200 {
		t.Fatalf("GET /v1/journal/check: %d %s", code, body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"first", "from", "ok", "omitted", "records", "snapshot", "to", "violations"}; !slices.Equal(names, want) {
		t.Fatalf("fields %v, want %v", names, want)
	}
	h := s.height(t)
	cl := &api.Client{Base: s.url, Token: s.token}
	rep, err := cl.CheckJournal(context.Background())
	if err != nil || !rep.OK || rep.Records != h || rep.From != 1 || rep.To != h || rep.Violations == nil || len(rep.Violations) != 0 {
		t.Fatalf("client: %+v %v, want a clean check of 1..%d", rep, err, h)
	}
}
