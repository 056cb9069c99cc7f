package api_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aos-kernel/aos/api"
)

func (s *served) pendingPage(t *testing.T, query string) api.PendingPage {
	t.Helper()
	code, body := s.do(t, "GET", "/v1/pending?"+query, "")
	var p api.PendingPage
	if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
		t.Fatalf("GET /v1/pending?%s: %d %s", query, code, body)
	}
	return p
}

// TestPending: GET /v1/pending lists every intent in flight, oldest first:
// each order's charge (queued until the payments executor claims it, then
// claimed with its lease) and its expiry timer (with its due time, the
// timer's deliver_at_ns); pages of any size give the same list; the
// filters keep one effect or one workflow; total counts what they keep.
func TestPending(t *testing.T) {
	s := serveWorld(t, true)
	s.payments(t)
	for _, k := range []string{"o1", "o2", "o3"} {
		s.order(t, k)
	}
	all := s.pendingPage(t, "limit=1000")
	if all.Total != 6 || len(all.Intents) != 6 || all.Next != "" {
		t.Fatalf("all in flight: %+v", all)
	}
	for i, it := range all.Intents {
		if i > 0 && it.EmittedAt < all.Intents[i-1].EmittedAt {
			t.Errorf("row %d opened at %d after row %d at %d: not oldest first", i, it.EmittedAt, i-1, all.Intents[i-1].EmittedAt)
		}
		switch it.Effect {
		case "sys/timer.set@1":
			if it.DueNs == 0 || it.State != "timer" || it.Executor != "builtin" {
				t.Errorf("timer row: %+v", it)
			}
		case chargeFx:
			if it.DueNs != 0 || it.State != "queued" || it.Executor != "" || it.LeaseUntil != nil {
				t.Errorf("charge row: %+v", it)
			}
		default:
			t.Errorf("row of effect %s", it.Effect)
		}
		if it.Workflow != orderWF || len(it.Key) == 0 {
			t.Errorf("row's origin: %+v", it)
		}
	}
	for limit := 1; limit <= 6; limit++ {
		var got []api.PendingIntent
		after := ""
		for pages := 0; ; pages++ {
			q := "limit=" + itoa(uint64(limit))
			if after != "" {
				q += "&after=" + after
			}
			p := s.pendingPage(t, q)
			if len(p.Intents) > limit || p.Total != 6 || pages > 6 {
				t.Fatalf("limit %d: page %+v", limit, p)
			}
			got = append(got, p.Intents...)
			if p.Next == "" {
				break
			}
			after = p.Next
		}
		if !reflect.DeepEqual(got, all.Intents) {
			t.Errorf("limit %d: pages give %+v, want %+v", limit, got, all.Intents)
		}
	}
	timers := s.pendingPage(t, "effect=sys/timer.set@1")
	if timers.Total != 3 || len(timers.Intents) != 3 {
		t.Errorf("timers: %+v", timers)
	}
	for _, it := range timers.Intents {
		if it.Effect != "sys/timer.set@1" {
			t.Errorf("the timer filter kept %+v", it)
		}
	}
	if p := s.pendingPage(t, "workflow=com.example/other@1"); p.Total != 0 || len(p.Intents) != 0 {
		t.Errorf("another workflow's: %+v", p)
	}

	// The payments executor claims one charge: it is claimed, with its lease.
	code, body := s.do(t, "POST", "/v1/effects/claim", `{"executor":"payments","effects":["`+chargeFx+`"],"max":1}`)
	var claim struct{ Intents []struct{ Hash string } }
	if code != 200 || json.Unmarshal([]byte(body), &claim) != nil || len(claim.Intents) != 1 {
		t.Fatalf("claim: %d %s", code, body)
	}
	for _, it := range s.pendingPage(t, "effect="+chargeFx).Intents {
		claimed := it.Hash == claim.Intents[0].Hash
		if claimed != (it.State == "claimed" && it.Executor == "payments" && it.LeaseUntil != nil) {
			t.Errorf("after claiming %s: %+v", claim.Intents[0].Hash, it)
		}
	}
}
