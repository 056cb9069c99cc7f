package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The OpenAPI document is kept true by these tests: its operations are
// exactly the route table's, and it is internally consistent. They do not
// check response shapes against live answers.

const openAPIFile = "../docs/openapi.json"

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(openAPIFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	return doc
}

// openAPIPath turns a ServeMux pattern's path into an OpenAPI path
// template: both write a parameter as {name}; {name...} matches the rest of
// the path and {$} only anchors the end.
func openAPIPath(pattern string) string {
	p := strings.ReplaceAll(pattern, "{$}", "")
	return strings.ReplaceAll(p, "...}", "}")
}

// operations lists the document's operations as "METHOD /path" with each
// operation object.
func operations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no paths object", openAPIFile)
	}
	ops := map[string]map[string]any{}
	for path, v := range paths {
		item, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: paths[%q] is not an object", openAPIFile, path)
		}
		for _, m := range openAPIMethods {
			if op, ok := item[m]; ok {
				o, ok := op.(map[string]any)
				if !ok {
					t.Fatalf("%s: paths[%q].%s is not an object", openAPIFile, path, m)
				}
				ops[strings.ToUpper(m)+" "+path] = o
			}
		}
	}
	return ops
}

func TestOpenAPIVersion(t *testing.T) {
	doc := loadOpenAPI(t)
	v, _ := doc["openapi"].(string)
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Fatalf("%s: openapi is %q, want 3.1.x", openAPIFile, v)
	}
}

// TestOpenAPIMatchesRoutes: a route added to the table without documenting
// it, or an operation documented that the server does not have, fails here.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	served := map[string]bool{}
	for _, rt := range (&Server{}).routes() {
		if rt.method == "" || strings.ContainsAny(rt.method, " /") {
			t.Fatalf("route %q: every route names one method", rt.pattern)
		}
		served[rt.method+" "+openAPIPath(rt.pattern)] = true
	}
	documented := operations(t, loadOpenAPI(t))
	var missing, extra []string
	for k := range served {
		if documented[k] == nil {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("routes not documented in %s: %s", openAPIFile, strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("operations in %s that the server has no route for: %s", openAPIFile, strings.Join(extra, ", "))
	}
}

// TestRoutesAllServed: with metrics configured, every route in the table
// has a handler, so the table is what the mux serves.
func TestRoutesAllServed(t *testing.T) {
	for _, rt := range (&Server{Metrics: prometheus.NewRegistry()}).routes() {
		if rt.handler == nil {
			t.Errorf("%s %s has no handler", rt.method, rt.pattern)
		}
	}
}

var pathParam = regexp.MustCompile(`\{([^{}]+)\}`)

func TestOpenAPIOperations(t *testing.T) {
	doc := loadOpenAPI(t)
	paths := doc["paths"].(map[string]any)
	for key, op := range operations(t, doc) {
		t.Run(key, func(t *testing.T) {
			if rs, _ := op["responses"].(map[string]any); len(rs) == 0 {
				t.Errorf("declares no response")
			}
			path := key[strings.IndexByte(key, ' ')+1:]
			declared := map[string]bool{}
			item := paths[path].(map[string]any)
			for _, list := range []any{item["parameters"], op["parameters"]} {
				ps, _ := list.([]any)
				for i, p := range ps {
					pm, ok := resolveRef(doc, p).(map[string]any)
					if !ok {
						t.Errorf("parameter %d does not resolve to an object", i)
						continue
					}
					if pm["in"] != "path" {
						continue
					}
					name, _ := pm["name"].(string)
					if pm["required"] != true {
						t.Errorf("path parameter %q is not required: true", name)
					}
					declared[name] = true
				}
			}
			inTemplate := map[string]bool{}
			for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
				inTemplate[m[1]] = true
				if !declared[m[1]] {
					t.Errorf("path parameter {%s} is not declared", m[1])
				}
			}
			for name := range declared {
				if !inTemplate[name] {
					t.Errorf("path parameter %q is declared but not in the path", name)
				}
			}
		})
	}
}

// TestOpenAPIRefs: every $ref points at an existing components entry.
func TestOpenAPIRefs(t *testing.T) {
	doc := loadOpenAPI(t)
	n := 0
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"]; ok {
				n++
				s, _ := r.(string)
				if !strings.HasPrefix(s, "#/components/") {
					t.Errorf("%s: $ref %q is not a #/components/ reference", at, r)
				} else if lookupPointer(doc, s[1:]) == nil {
					t.Errorf("%s: $ref %q resolves to nothing", at, s)
				}
			}
			for k, e := range x {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", doc)
	if n == 0 {
		t.Fatalf("%s has no $ref: the walk is broken", openAPIFile)
	}
}

// resolveRef follows v's $ref chain within doc (nil when it breaks).
func resolveRef(doc map[string]any, v any) any {
	for range 10 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		r, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		if !strings.HasPrefix(r, "#") {
			return nil
		}
		v = lookupPointer(doc, r[1:])
	}
	return nil
}

// lookupPointer resolves a JSON pointer (RFC 6901) in doc.
func lookupPointer(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[tok]; !ok {
			return nil
		}
	}
	return cur
}
