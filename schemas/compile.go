package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// schemaURLPrefix is the internal absolute URL under which each def's schema
// is added to the compiler. It only exists inside this package: def names are
// rewritten to it before compiling and back in error messages.
const schemaURLPrefix = "aos:///schema/"

func schemaURL(name string) string { return schemaURLPrefix + name }

// ErrNoLoading is returned for any attempt by the schema compiler to load a
// document by URL. Schemas come only from defs in memory.
var ErrNoLoading = errors.New("schemas: loading schemas by URL is not allowed")

func refuseLoad(url string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%w: %s (reference other schemas by def name)", ErrNoLoading, url)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*@[1-9][0-9]*$`)

// CheckName reports whether name has the form namespace/name@N: namespace and
// name of letters, digits, '.', '_' and '-' (starting with a letter or digit),
// N a positive integer without leading zeros.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("schemas: bad name %q: want namespace/name@N (for example com.acme/OrderId@1)", name)
	}
	if len(name) > 256 {
		return fmt.Errorf("schemas: name %q is longer than 256 bytes", name)
	}
	return nil
}

// Registry holds compiled schemas by name. Reads (Has, Arms, Names, FromJSON,
// FromValue, Validate) are lock-free against an immutable snapshot and safe
// from many goroutines; Define builds a new snapshot and publishes it
// atomically, so a reader sees either all of a batch or none of it.
type Registry struct {
	mu    sync.Mutex // serializes Define
	state atomic.Pointer[regState]
}

type regState struct {
	defs  map[string]*compiled
	names []string
	// bytesBelow[s] is true when a string at or below schema s may be a byte
	// string (contentEncoding base64). Subtrees without any skip the
	// schema-guided walk entirely.
	bytesBelow map[*jsonschema.Schema]bool
}

type compiled struct {
	name   string
	src    []byte // the def as given (schema JSON, or arms), to tell a redefinition from a repeat
	doc    []byte // the JSON document added to the compiler (refs rewritten)
	arms   []Arm
	schema *jsonschema.Schema
	fast   *plan // the fast path of Validate; nil when the schema uses keywords it lacks
	// valid remembers values the general path of Validate accepted, by hash.
	// Validity of (def, bytes) never changes (a def cannot be redefined), so
	// it only saves repeating a ~30 µs check; the fast path needs no cache.
	valid *lru.Cache[Hash, struct{}]
}

// validCacheSize bounds each def's cache of values known valid.
const validCacheSize = 1 << 14

func newCompiled(name string, src, doc []byte, arms []Arm, s *jsonschema.Schema, fast *plan) *compiled {
	valid, err := lru.New[Hash, struct{}](validCacheSize)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &compiled{name: name, src: src, doc: doc, arms: arms, schema: s, fast: fast, valid: valid}
}

// NewRegistry returns a registry holding the built-in sys/ schemas, compiled.
func NewRegistry() *Registry {
	r := &Registry{}
	r.state.Store(&regState{defs: map[string]*compiled{}, bytesBelow: map[*jsonschema.Schema]bool{}})
	defs := make([]SchemaDef, 0, len(sysCompact))
	for _, name := range SysNames() {
		defs = append(defs, SchemaDef{Name: name, Schema: sysCompact[name]})
	}
	if err := r.define(defs, true); err != nil {
		panic("schemas: built-in schemas do not compile: " + err.Error())
	}
	return r
}

// Has reports whether name is defined.
func (r *Registry) Has(name string) bool {
	_, ok := r.state.Load().defs[name]
	return ok
}

// Arms returns the arms of a variant def in declared order, nil for any other name.
func (r *Registry) Arms(name string) []Arm {
	c := r.state.Load().defs[name]
	if c == nil || c.arms == nil {
		return nil
	}
	return append([]Arm(nil), c.arms...)
}

// Names returns every defined name, sorted.
func (r *Registry) Names() []string {
	return append([]string(nil), r.state.Load().names...)
}

func (r *Registry) lookup(name string) (*regState, *compiled, error) {
	st := r.state.Load()
	c := st.defs[name]
	if c == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownSchema, name)
	}
	return st, c, nil
}

// ErrUnknownSchema reports a schema name the registry does not hold.
var ErrUnknownSchema = errors.New("schemas: unknown schema")

// Define compiles a batch of defs. Defs may reference each other (in any
// order) and already-defined names, including sys/ ones, by name in "$ref".
// Defining a name again with identical content is a no-op; with different
// content it is an error. On error Define returns DefErrors listing every
// problem found and the registry is unchanged.
func (r *Registry) Define(defs []SchemaDef) error {
	return r.define(defs, false)
}

// pending is one def of a batch on its way to being compiled.
type pending struct {
	idx    int
	def    SchemaDef
	src    []byte
	doc    []byte
	refs   []nameRef
	broken bool
}

type nameRef struct {
	name, ptr string
}

func (r *Registry) define(defs []SchemaDef, sys bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.state.Load()

	var errs DefErrors
	fail := func(p *pending, name, ptr, format string, a ...any) {
		errs = append(errs, &DefError{Name: name, Pointer: ptr, Msg: fmt.Sprintf(format, a...)})
		if p != nil {
			p.broken = true
		}
	}
	batch := map[string]*pending{}
	var order []*pending
	for i, d := range defs {
		p := &pending{idx: i, def: d}
		nameOK := true
		if err := CheckName(d.Name); err != nil {
			fail(p, d.Name, "/name", "bad name: want namespace/name@N (for example com.acme/OrderId@1)")
			nameOK = false
		} else if IsSysName(d.Name) && !sys {
			fail(p, d.Name, "/name", "sys/ names are built in and cannot be redefined")
			nameOK = false
		} else if _, dup := batch[d.Name]; dup {
			fail(p, d.Name, "/name", "defined more than once in this batch")
			nameOK = false
		}
		switch {
		case len(d.Schema) > 0 && d.Variant != nil:
			fail(p, d.Name, "", "a def has either a schema or a variant, not both")
		case len(d.Schema) == 0 && d.Variant == nil:
			fail(p, d.Name, "", "a def needs a schema or a variant")
		case d.Variant != nil:
			p.prepareVariant(fail)
		default:
			p.prepareSchema(fail)
		}
		if !nameOK {
			continue
		}
		if old := cur.defs[d.Name]; old != nil && !p.broken {
			if !bytes.Equal(old.src, p.src) {
				fail(p, d.Name, "/name", "already defined with different content")
			}
			batch[d.Name] = p // identical repeat: keep for duplicate detection, compile nothing
			p.broken = true   // (not an error: excluded from compilation below)
			p.src = nil
			continue
		}
		batch[d.Name] = p
		order = append(order, p)
	}

	// Every referenced name must resolve to a defined name or a def of this batch.
	for _, p := range order {
		for _, ref := range p.refs {
			if cur.defs[ref.name] != nil {
				continue
			}
			if q := batch[ref.name]; q != nil && q.src != nil {
				continue
			}
			fail(p, p.def.Name, ref.ptr, "unknown schema %q", ref.name)
		}
	}
	// A def that reaches a broken def of the batch is not compiled: its own
	// problems, if any, are already listed, and the broken one is reported once.
	for changed := true; changed; {
		changed = false
		for _, p := range order {
			if p.broken {
				continue
			}
			for _, ref := range p.refs {
				if q := batch[ref.name]; q != nil && q.broken && q.src != nil {
					p.broken, changed = true, true
					break
				}
			}
		}
	}

	comp := newCompiler()
	for name, c := range cur.defs {
		if batch[name] == nil {
			if err := comp.AddResource(schemaURL(name), bytes.NewReader(c.doc)); err != nil {
				panic("schemas: re-adding " + name + ": " + err.Error())
			}
		}
	}
	for _, p := range order {
		if p.doc == nil {
			continue
		}
		if err := comp.AddResource(schemaURL(p.def.Name), bytes.NewReader(p.doc)); err != nil {
			fail(p, p.def.Name, "/schema", "%s", cleanMsg(err.Error()))
		}
	}
	variants := map[string][]Arm{}
	for name, c := range cur.defs {
		if c.arms != nil {
			variants[name] = c.arms
		}
	}
	for _, p := range order {
		if p.def.Variant != nil {
			variants[p.def.Name] = p.def.Variant
		}
	}
	out := map[string]*compiled{}
	for _, p := range order {
		if p.broken {
			continue
		}
		s, err := comp.Compile(schemaURL(p.def.Name))
		if err != nil {
			ptr := "/schema"
			if p.def.Variant != nil {
				ptr = "/variant"
			}
			msg := compileMsg(err)
			if loop, ok := strings.CutPrefix(msg, "infinite loop "); ok {
				// The compiler's word for a def that refers to itself
				// in place; refCycles words the longer cycles alike.
				msg = fmt.Sprintf("$ref cycle: %s refers to itself at the same place in a value (%s), so no value could ever be validated; "+
					"break the cycle, or refer through a keyword that descends into the value (properties, items)", p.def.Name, loop)
			}
			fail(p, p.def.Name, ptr, "%s", msg)
			continue
		}
		out[p.def.Name] = newCompiled(p.def.Name, p.src, p.doc, append([]Arm(nil), p.def.Variant...), s, buildPlan(s, variants))
	}
	refCycles(order, out, fail)
	if len(errs) > 0 {
		idx := map[string]int{}
		for i, d := range defs {
			if _, ok := idx[d.Name]; !ok {
				idx[d.Name] = i
			}
		}
		sort.SliceStable(errs, func(i, j int) bool { return idx[errs[i].Name] < idx[errs[j].Name] })
		return errs
	}
	if len(out) == 0 {
		return nil
	}

	next := &regState{defs: make(map[string]*compiled, len(cur.defs)+len(out))}
	for k, v := range cur.defs {
		next.defs[k] = v
	}
	roots := make([]*jsonschema.Schema, 0, len(out))
	for k, v := range out {
		next.defs[k] = v
		roots = append(roots, v.schema)
	}
	for k := range next.defs {
		next.names = append(next.names, k)
	}
	sort.Strings(next.names)
	next.bytesBelow = markBytes(cur.bytesBelow, roots)
	r.state.Store(next)
	return nil
}

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.LoadURL = refuseLoad
	c.AssertFormat = true
	c.AssertContent = true
	return c
}

// prepareSchema parses the def's schema, checks the references and keywords
// this package restricts, and rewrites def-name refs to internal URLs.
func (p *pending) prepareSchema(fail func(*pending, string, string, string, ...any)) {
	name := p.def.Name
	p.src = []byte(p.def.Schema)
	doc, err := DecodeJSON(p.def.Schema)
	if err != nil {
		fail(p, name, "/schema", "invalid JSON: %s", strings.TrimPrefix(err.Error(), "schemas: "))
		return
	}
	rw := rewriter{p: p, fail: fail}
	doc = rw.schema(doc, "/schema", true)
	meta, err := metaFor(doc)
	if err != nil {
		fail(p, name, "/schema/$schema", "%v", err)
		return
	}
	if err := meta.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			for _, l := range leaves(ve) {
				fail(p, name, "/schema"+l.InstanceLocation, "%s", cleanMsg(l.Message))
			}
		} else {
			fail(p, name, "/schema", "%s", cleanMsg(err.Error()))
		}
		return
	}
	p.doc, err = json.Marshal(doc)
	if err != nil {
		fail(p, name, "/schema", "%v", err)
	}
}

// prepareVariant checks the arms and generates the schema of the variant:
// exactly {"$tag": <tag>, "$value": <value of that arm>}.
func (p *pending) prepareVariant(fail func(*pending, string, string, string, ...any)) {
	name := p.def.Name
	arms := p.def.Variant
	if len(arms) == 0 {
		fail(p, name, "/variant", "a variant needs at least one arm")
		return
	}
	seen := map[string]bool{}
	tags := make([]any, 0, len(arms))
	var cases []any
	var src bytes.Buffer
	for i, a := range arms {
		ptr := "/variant/" + escapeToken(a.Tag)
		if a.Tag == "" {
			ptr = "/variant/" + strconv.Itoa(i)
			fail(p, name, ptr, "arm tag is empty")
		} else if seen[a.Tag] {
			fail(p, name, ptr, "arm %q declared more than once", a.Tag)
		}
		seen[a.Tag] = true
		if err := CheckName(a.Schema); err != nil {
			fail(p, name, ptr, "arm schema %q is not a def name (namespace/name@N)", a.Schema)
		} else {
			p.refs = append(p.refs, nameRef{a.Schema, ptr})
		}
		tags = append(tags, a.Tag)
		cases = append(cases, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"$tag": map[string]any{"const": a.Tag}}},
			"then": map[string]any{"properties": map[string]any{"$value": map[string]any{"$ref": schemaURL(a.Schema)}}},
		})
		fmt.Fprintf(&src, "%q=%q;", a.Tag, a.Schema)
	}
	p.src = src.Bytes()
	doc := map[string]any{
		"type":                 "object",
		"required":             []any{"$tag", "$value"},
		"additionalProperties": false,
		"properties": map[string]any{
			"$tag":   map[string]any{"enum": tags},
			"$value": true,
		},
		"allOf": cases,
	}
	var err error
	if p.doc, err = json.Marshal(doc); err != nil {
		fail(p, name, "/variant", "%v", err)
	}
}

// rewriter walks a schema document keyword by keyword (so that "$ref" inside
// "const", "enum" or "properties" names is left alone).
type rewriter struct {
	p    *pending
	fail func(*pending, string, string, string, ...any)
}

// Keywords whose value is one schema, a map of schemas, or an array of schemas.
var (
	kwSchema = map[string]bool{"additionalProperties": true, "additionalItems": true, "contains": true,
		"propertyNames": true, "not": true, "if": true, "then": true, "else": true,
		"unevaluatedItems": true, "unevaluatedProperties": true, "contentSchema": true, "items": true}
	kwSchemaMap   = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true, "dependencies": true}
	kwSchemaArray = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true}
)

func (w *rewriter) schema(v any, ptr string, root bool) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v // booleans; anything else the meta-schema reports
	}
	name := w.p.def.Name
	for k, val := range m {
		kp := ptr + "/" + escapeToken(k)
		switch {
		case k == "$ref":
			s, ok := val.(string)
			if !ok {
				continue
			}
			if nv, ok := w.ref(s, kp); ok {
				m[k] = nv
			}
		case k == "$id":
			w.fail(w.p, name, kp, "$id is not allowed: a schema is identified by its def name")
		case k == "$schema" && !root:
			w.fail(w.p, name, kp, "$schema is only allowed at the top of a def")
		case k == "$dynamicRef" || k == "$recursiveRef":
			if s, ok := val.(string); ok && !strings.HasPrefix(s, "#") {
				w.fail(w.p, name, kp, "%s must be local (start with #)", k)
			}
		case k == "contentEncoding":
			if s, ok := val.(string); ok && s != "base64" {
				w.fail(w.p, name, kp, "contentEncoding %q is not supported (only base64)", s)
			}
		case kwSchemaMap[k]:
			if sub, ok := val.(map[string]any); ok {
				for sk, sv := range sub {
					sub[sk] = w.schema(sv, kp+"/"+escapeToken(sk), false)
				}
			}
		case kwSchemaArray[k] && isArray(val):
			arr := val.([]any)
			for i := range arr {
				arr[i] = w.schema(arr[i], kp+"/"+strconv.Itoa(i), false)
			}
		case kwSchema[k]:
			m[k] = w.schema(val, kp, false)
		}
	}
	return m
}

func isArray(v any) bool { _, ok := v.([]any); return ok }

// ref classifies one "$ref": local refs stay, def names (optionally with a
// "#..." fragment) become internal URLs, anything else is refused: no file,
// no network, no relative documents.
func (w *rewriter) ref(s, ptr string) (string, bool) {
	if strings.HasPrefix(s, "#") {
		return s, false
	}
	target, frag, _ := strings.Cut(s, "#")
	if CheckName(target) != nil {
		w.fail(w.p, w.p.def.Name, ptr, "$ref %q is neither a def name (namespace/name@N) nor a local reference (#...): schemas are never loaded from files or URLs", s)
		return s, false
	}
	w.p.refs = append(w.p.refs, nameRef{target, ptr})
	if frag != "" {
		return schemaURL(target) + "#" + frag, true
	}
	return schemaURL(target), true
}

// metaFor picks the meta-schema for a document: its "$schema" if it names a
// draft the library knows, else draft 2020-12.
func metaFor(doc any) (*jsonschema.Schema, error) {
	url := "https://json-schema.org/draft/2020-12/schema"
	if m, ok := doc.(map[string]any); ok {
		if s, ok := m["$schema"]; ok {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("$schema must be a string")
			}
			url = str
		}
	}
	metaMu.Lock()
	defer metaMu.Unlock()
	if s := metaCache[url]; s != nil {
		return s, nil
	}
	s, err := newCompiler().Compile(url)
	if err != nil {
		return nil, fmt.Errorf("unsupported $schema %q (known: JSON Schema drafts 4, 6, 7, 2019-09, 2020-12)", url)
	}
	metaCache[url] = s
	return s, nil
}

var (
	metaMu    sync.Mutex
	metaCache = map[string]*jsonschema.Schema{}
)

// compileMsg flattens a compile error into one readable line.
func compileMsg(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var parts []string
		for _, l := range leaves(ve) {
			parts = append(parts, l.InstanceLocation+": "+l.Message)
		}
		return cleanMsg(strings.Join(parts, "; "))
	}
	var se *jsonschema.SchemaError
	if errors.As(err, &se) && se.Err != nil {
		return cleanMsg(se.Err.Error())
	}
	return cleanMsg(err.Error())
}

// cleanMsg turns internal URLs back into def names.
func cleanMsg(s string) string {
	s = strings.TrimPrefix(s, "jsonschema: ")
	return sortNameList(strings.ReplaceAll(s, schemaURLPrefix, ""))
}

// sortNameList puts the property names of the validator's
// "additionalProperties 'b', 'a' not allowed" message in order: the
// validator lists them in Go map order, and messages reach the journal.
func sortNameList(s string) string {
	const pre, post = "additionalProperties '", "' not allowed"
	if !strings.HasPrefix(s, pre) || !strings.HasSuffix(s, post) {
		return s
	}
	names := strings.Split(s[len(pre):len(s)-len(post)], "', '")
	slices.Sort(names)
	return pre + strings.Join(names, "', '") + post
}

// leaves returns the innermost validation errors, the ones that say what is wrong.
func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// markBytes extends prev with bytesBelow for every schema reachable from roots.
func markBytes(prev map[*jsonschema.Schema]bool, roots []*jsonschema.Schema) map[*jsonschema.Schema]bool {
	out := make(map[*jsonschema.Schema]bool, len(prev))
	for k, v := range prev {
		out[k] = v
	}
	var nodes []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var visit func(*jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		nodes = append(nodes, s)
		eachChild(s, visit)
	}
	for _, r := range roots {
		visit(r)
	}
	for _, n := range nodes {
		out[n] = n.ContentEncoding == "base64"
	}
	for changed := true; changed; {
		changed = false
		for _, n := range nodes {
			if out[n] {
				continue
			}
			eachChild(n, func(c *jsonschema.Schema) {
				if c != nil && out[c] && !out[n] {
					out[n], changed = true, true
				}
			})
		}
	}
	return out
}

// eachChild calls f for every subschema that can apply at or below the
// location s applies to (in-place applicators and child applicators; not
// "not", "contains", "propertyNames" or "contentSchema", which never decide
// whether a string is bytes).
func eachChild(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	f(s.Ref)
	f(s.RecursiveRef)
	f(s.DynamicRef)
	for _, c := range s.AllOf {
		f(c)
	}
	for _, c := range s.AnyOf {
		f(c)
	}
	for _, c := range s.OneOf {
		f(c)
	}
	f(s.If)
	f(s.Then)
	f(s.Else)
	for _, c := range s.DependentSchemas {
		f(c)
	}
	for _, c := range s.Dependencies {
		if cs, ok := c.(*jsonschema.Schema); ok {
			f(cs)
		}
	}
	for _, c := range s.Properties {
		f(c)
	}
	for _, c := range s.PatternProperties {
		f(c)
	}
	if c, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		f(c)
	}
	f(s.UnevaluatedProperties)
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		f(it)
	case []*jsonschema.Schema:
		for _, c := range it {
			f(c)
		}
	}
	if c, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		f(c)
	}
	for _, c := range s.PrefixItems {
		f(c)
	}
	f(s.Items2020)
	f(s.UnevaluatedItems)
}

// escapeToken escapes one JSON pointer token (RFC 6901).
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pointer joins tokens into a JSON pointer; the root is "/" for readability.
func pointer(path []string) string {
	if len(path) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range path {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}
