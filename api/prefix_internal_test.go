package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// Two hashes that share their first 8 hex digits cannot be made from real
// content in a test (about 2^16 intents would be needed for even odds), so
// the ambiguous answer is pinned here on hashes written out by hand; the
// answers tests resolve real prefixes through the routes.
func TestHashPrefix(t *testing.T) {
	a, _ := schemas.ParseHash("sha256:0123456789" + strings.Repeat("a", 54))
	b, _ := schemas.ParseHash("sha256:0123456789" + strings.Repeat("b", 54))
	for _, tc := range []struct {
		in     string
		digits string
		full   bool
		status int
		says   string
	}{
		{in: a.String(), full: true},
		{in: strings.ToUpper(a.String()[len("sha256:"):]), full: true},
		{in: "sha256:01234567", digits: "01234567"},
		{in: "0123456789AB", digits: "0123456789ab"},
		{in: "sha256:0123456", status: http.StatusBadRequest, says: "has 7 hex digits"},
		{in: "", status: http.StatusBadRequest, says: "has 0 hex digits"},
		{in: "sha256:0123456g", status: http.StatusBadRequest, says: "or a prefix of at least 8 hex digits"},
		{in: "sha256:" + strings.Repeat("a", 65), status: http.StatusBadRequest, says: "has 65 hex digits"},
	} {
		h, digits, full, err := hashPrefix(tc.in, "intent")
		var e *Error
		switch {
		case tc.status != 0:
			if !errors.As(err, &e) || e.Status != tc.status || e.Code != CodeInvalidInput || !strings.Contains(e.Message, tc.says) {
				t.Errorf("%q: %v, want %d invalid_input saying %q", tc.in, err, tc.status, tc.says)
			}
		case err != nil || full != tc.full || digits != tc.digits || (full && h != a):
			t.Errorf("%q: %v %q %v %v, want digits %q full %v", tc.in, h, digits, full, err, tc.digits, tc.full)
		}
	}

	if h, err := uniquePrefix("intent", "sha256:01234567", CodeNotFound, []schemas.Hash{a}, false); err != nil || h != a {
		t.Errorf("one match: %v %v", h, err)
	}
	_, err := uniquePrefix("intent", "sha256:01234567", CodeNotFound, []schemas.Hash{a, b}, true)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != CodeAmbiguous ||
		!strings.Contains(e.Message, a.String()) || !strings.Contains(e.Message, b.String()) || !strings.Contains(e.Message, ", ...") {
		t.Errorf("two matches: %v, want 409 ambiguous listing both and more", err)
	}
	_, err = uniquePrefix("intent", "sha256:01234567", CodeUnknownIntent, nil, false)
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != CodeUnknownIntent {
		t.Errorf("no match: %v, want 404 unknown_intent", err)
	}
}
