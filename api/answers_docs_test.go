package api

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/views"
)

// AnswerKey is one documented answer of the API: a route ("METHOD
// /pattern", as the route table writes it), a status, and the error code
// ("" for a success). Exported for the package's external tests
// (answers_test.go), which provoke the answers.
type AnswerKey struct {
	Route  string
	Status int
	Code   string
}

func (k AnswerKey) String() string { return fmt.Sprintf("%s %d %s", k.Route, k.Status, k.Code) }

const apiDoc = "../docs/API.md"

var (
	answersHeading = regexp.MustCompile("^Answers of `([A-Z]+ \\S+)`")
	statusCell     = regexp.MustCompile(`^[1-5]\d\d$`)
	codeCell       = regexp.MustCompile("^`([a-z_]+)`$")
)

// DocumentedAnswers reads docs/API.md's answer tables: each route's
// ("Answers of `METHOD /pattern`") and, added to every route, the table
// "Answers of every route".
func DocumentedAnswers(t testing.TB) map[AnswerKey]bool {
	t.Helper()
	b, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	perRoute := map[string][]AnswerKey{}
	var every []AnswerKey
	var cur *[]AnswerKey
	var route string
	for i, line := range strings.Split(string(b), "\n") {
		switch m := answersHeading.FindStringSubmatch(line); {
		case m != nil:
			route = m[1]
			if _, dup := perRoute[route]; dup {
				t.Fatalf("%s:%d: a second answers table for %s", apiDoc, i+1, route)
			}
			rows := []AnswerKey{}
			cur = &rows
			continue
		case strings.HasPrefix(line, "Answers of every route"):
			route, cur = "", &every
			continue
		}
		if cur == nil {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(*cur) > 0 { // the table ended
				if route != "" {
					perRoute[route] = *cur
				}
				cur = nil
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if cells[0] == "status" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) != 4 || !statusCell.MatchString(cells[0]) {
			t.Fatalf("%s:%d: an answers row is | status | code | when | journaled |: %q", apiDoc, i+1, line)
		}
		st, _ := strconv.Atoi(cells[0])
		code := ""
		if cells[1] != "—" {
			m := codeCell.FindStringSubmatch(cells[1])
			if m == nil {
				t.Fatalf("%s:%d: code %q is not one `code` or —", apiDoc, i+1, cells[1])
			}
			code = m[1]
		}
		if (st < 300) != (code == "") || cells[2] == "" || cells[3] == "" {
			t.Fatalf("%s:%d: a success has no code, a refusal one, and both say when and what is journaled: %q", apiDoc, i+1, line)
		}
		*cur = append(*cur, AnswerKey{route, st, code})
	}
	if cur != nil && route != "" {
		perRoute[route] = *cur
	}
	if len(every) == 0 || len(perRoute) == 0 {
		t.Fatalf("%s: no answers tables found", apiDoc)
	}
	out := map[AnswerKey]bool{}
	for r, keys := range perRoute {
		if len(keys) == 0 {
			t.Fatalf("%s: the answers table of %s is empty", apiDoc, r)
		}
		for _, k := range append(keys, every...) {
			k.Route = r
			if out[k] {
				t.Fatalf("%s: %s listed twice", apiDoc, k)
			}
			out[k] = true
		}
	}
	return out
}

// TestAPIAnswersDocsAgree: every operation of docs/openapi.json lists as
// responses exactly the statuses docs/API.md's table gives its route, with
// each error code named (`code`) in that response's description; and every
// route has a table.
func TestAPIAnswersDocsAgree(t *testing.T) {
	doc := DocumentedAnswers(t)
	byRoute := map[string]map[int][]string{}
	for k := range doc {
		if byRoute[k.Route] == nil {
			byRoute[k.Route] = map[int][]string{}
		}
		byRoute[k.Route][k.Status] = append(byRoute[k.Route][k.Status], k.Code)
	}
	api := loadOpenAPI(t)
	ops := operations(t, api)
	for key, op := range ops {
		want := byRoute[key]
		if want == nil {
			t.Errorf("%s: no answers table in %s", key, apiDoc)
			continue
		}
		rs, _ := op["responses"].(map[string]any)
		var got, exp []string
		for st := range rs {
			got = append(got, st)
		}
		for st := range want {
			exp = append(exp, strconv.Itoa(st))
		}
		slices.Sort(got)
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Errorf("%s: %s responses %v, %s lists %v", key, openAPIFile, got, apiDoc, exp)
			continue
		}
		for st, codes := range want {
			r, _ := resolveRef(api, rs[strconv.Itoa(st)]).(map[string]any)
			desc, _ := r["description"].(string)
			for _, c := range codes {
				if c != "" && !strings.Contains(desc, "`"+c+"`") {
					t.Errorf("%s %d: %s's description does not name `%s`: %q", key, st, openAPIFile, c, desc)
				}
			}
			if st >= 400 {
				c, _ := r["content"].(map[string]any)
				js, _ := c["application/json"].(map[string]any)
				if !hasErrorMember(api, js["schema"]) {
					t.Errorf("%s %d: the response's JSON schema has no error member (the API's error shape)", key, st)
				}
			}
		}
	}
	for r := range byRoute {
		if ops[r] == nil {
			t.Errorf("%s has an answers table for %s, which %s does not have", apiDoc, r, openAPIFile)
		}
	}
}

// hasErrorMember: schema (followed through $ref, allOf, oneOf) is an object
// with an "error" property, as every refusal's body is.
func hasErrorMember(doc map[string]any, schema any) bool {
	m, ok := resolveRef(doc, schema).(map[string]any)
	if !ok {
		return false
	}
	if props, ok := m["properties"].(map[string]any); ok && props["error"] != nil {
		return true
	}
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		list, _ := m[k].([]any)
		for _, sub := range list {
			if hasErrorMember(doc, sub) {
				return true
			}
		}
	}
	return false
}

// BodyRoutes are the routes ("METHOD /pattern") whose operation in
// docs/openapi.json has a request body, sorted. Exported for
// answers_test.go, which sends each a valid body with trailing data.
func BodyRoutes(t testing.TB) []string {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("BodyRoutes needs a *testing.T")
	}
	var out []string
	for key, op := range operations(tt, loadOpenAPI(tt)) {
		if op["requestBody"] != nil {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// TestTrailingDataAsDocumented: docs/API.md quotes the refusal of trailing
// data in the words every route answers it with (views.TrailingError, which
// the answers test checks on each route that takes a body).
func TestTrailingDataAsDocumented(t *testing.T) {
	b, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	quoted := "`" + strings.Replace((&views.TrailingError{Offset: 57}).Error(), "57", "N", 1) + "`"
	if !strings.Contains(string(b), quoted) {
		t.Fatalf("%s does not quote the trailing-data refusal %s", apiDoc, quoted)
	}
	if got, want := (&views.TrailingError{Offset: 57}).Error(), "trailing data after the JSON value (at byte 57)"; got != want {
		t.Fatalf("trailing data at 57: %q, want %q", got, want)
	}
}

// TestCurlExamplesSendJSON: every curl example in the docs that sends a
// body (-d, --data...) declares it JSON (or uses --json): curl -d alone
// sends a form type, which the API refuses with 415.
func TestCurlExamplesSendJSON(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md", "../examples/README.md")
	body := regexp.MustCompile(`(^|\s)(-d|--data(-raw|-binary)?)(\s|=)`)
	declares := regexp.MustCompile(`Content-Type: application/json|--json(\s|$)`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// An example is a line with curl and its continuations.
		text := strings.ReplaceAll(string(b), "\\\n", " ")
		for i, line := range strings.Split(text, "\n") {
			if !strings.Contains(line, "curl ") || !body.MatchString(line) {
				continue
			}
			n++
			if !declares.MatchString(line) {
				t.Errorf("%s: example %d sends a body without Content-Type: application/json: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if n == 0 {
		t.Fatal("no curl example with a body found in the docs")
	}
}
