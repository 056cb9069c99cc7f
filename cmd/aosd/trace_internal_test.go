package main

import "testing"

// TestInspectorCellURL: trace's link names the cell as the API reads the
// key: JSON when it parses (compacted), otherwise the text as a string, and
// null for an unkeyed workflow; each segment escaped, the workflow's "/"
// included.
func TestInspectorCellURL(t *testing.T) {
	for _, c := range []struct {
		key   string
		keyed bool
		want  string
	}{
		{"o-1", true, "/cells/com.example%2Forder.step@1/%22o-1%22"},
		{`"o-1"`, true, "/cells/com.example%2Forder.step@1/%22o-1%22"},
		{"42", true, "/cells/com.example%2Forder.step@1/42"},
		{`{"a": [1, 2]}`, true, "/cells/com.example%2Forder.step@1/%7B%22a%22:%5B1%2C2%5D%7D"},
		{"a/b c", true, "/cells/com.example%2Forder.step@1/%22a%2Fb%20c%22"},
		{"", false, "/cells/com.example%2Forder.step@1/null"},
	} {
		if got := inspectorCellURL("127.0.0.1:9", "com.example/order.step@1", c.key, c.keyed); got != "http://127.0.0.1:9"+c.want {
			t.Errorf("key %q (keyed %v): %s, want %s", c.key, c.keyed, got, c.want)
		}
	}
}
