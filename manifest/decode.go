package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/schemas"
)

// The def kinds a manifest file may hold.
const (
	KindSchema   = "defschema"
	KindModule   = "defmodule"
	KindWorkflow = "defworkflow"
	KindEffect   = "defeffect"
	KindManifest = "manifest"
)

var (
	tagRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	keyFieldRe = regexp.MustCompile(`^\$?[A-Za-z0-9_-]+(\.\$?[A-Za-z0-9_-]+)*$`)
)

// IsDefName reports whether s has the form namespace/name@N (the rule of
// schemas.CheckName, shared by every kind of def).
func IsDefName(s string) bool { return schemas.CheckName(s) == nil }

// isManifestName reports whether s names a world: namespace/name, optionally
// with @N.
func isManifestName(s string) bool {
	if strings.Contains(s, "@") {
		return IsDefName(s)
	}
	return IsDefName(s + "@1")
}

// rawDef is one def as found in a file, before and after decoding.
type rawDef struct {
	file  string // where it came from, for problems
	dir   string // directory wasm artifact paths are relative to
	ptr   string // JSON pointer of the def within its file
	kind  string
	name  string
	value map[string]any // as declared (numbers normalized)

	bad bool // decoding found a problem; skip cross-checks that need its fields

	schema   *SchemaDef
	doc      any // parsed "schema" document, for key_field checks
	module   *ModuleDef
	workflow *WorkflowDef
	effect   *EffectDef
	routing  *Routing
}

// fields reads the members of one JSON object strictly: each accessor marks
// its key as known, finish reports the rest as unknown fields.
type fields struct {
	l    *loader
	d    *rawDef
	ptr  string // pointer of this object relative to the def
	m    map[string]any
	used map[string]bool
}

func (l *loader) fieldsOf(d *rawDef, ptr string, v any, what string) *fields {
	m, ok := v.(map[string]any)
	if !ok {
		l.bad(d, ptr, "%s must be an object, found %s", what, jsonType(v))
		return nil
	}
	return &fields{l: l, d: d, ptr: ptr, m: m, used: map[string]bool{}}
}

func (f *fields) get(key string, required bool) (any, bool) {
	f.used[key] = true
	v, ok := f.m[key]
	if !ok && required {
		f.l.bad(f.d, f.ptr, "missing required field %q", key)
	}
	return v, ok
}

func (f *fields) str(key string, required bool) string {
	v, ok := f.get(key, required)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		f.l.bad(f.d, ptrJoin(f.ptr, key), "%q must be a string, found %s", key, jsonType(v))
	case s == "" && required:
		f.l.bad(f.d, ptrJoin(f.ptr, key), "%q must not be empty", key)
	case s == "":
		f.l.bad(f.d, ptrJoin(f.ptr, key), "%q must not be empty (leave the field out instead)", key)
	}
	return s
}

func (f *fields) strList(key string, required bool) []string {
	v, ok := f.get(key, required)
	if !ok {
		return nil
	}
	a, isArr := v.([]any)
	if !isArr {
		f.l.bad(f.d, ptrJoin(f.ptr, key), "%q must be an array of strings, found %s", key, jsonType(v))
		return nil
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, isStr := e.(string)
		if !isStr || s == "" {
			f.l.bad(f.d, ptrJoin(ptrJoin(f.ptr, key), strconv.Itoa(i)), "%q entries must be non-empty strings, found %s", key, jsonType(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (f *fields) integer(key string, required bool) (int64, bool) {
	v, ok := f.get(key, required)
	if !ok {
		return 0, false
	}
	n, isNum := v.(json.Number)
	if !isNum {
		f.l.bad(f.d, ptrJoin(f.ptr, key), "%q must be an integer, found %s", key, jsonType(v))
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		f.l.bad(f.d, ptrJoin(f.ptr, key), "%q must be an integer, found %s", key, n)
		return 0, false
	}
	return i, true
}

func (f *fields) object(key string, required bool) *fields {
	v, ok := f.get(key, required)
	if !ok {
		return nil
	}
	return f.l.fieldsOf(f.d, ptrJoin(f.ptr, key), v, fmt.Sprintf("%q", key))
}

// finish reports every member no accessor asked for.
func (f *fields) finish() {
	for _, k := range slices.Sorted(maps.Keys(f.m)) {
		if !f.used[k] {
			f.l.bad(f.d, ptrJoin(f.ptr, k), "unknown field %q", k)
		}
	}
}

func jsonType(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number " + string(t)
	case string:
		if t == "" {
			return "an empty string"
		}
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// decode fills the typed form of d from its declared value, reporting every
// structural problem (unknown fields, wrong types, missing fields).
func (l *loader) decode(d *rawDef) {
	f := &fields{l: l, d: d, m: d.value, used: map[string]bool{"$kind": true}}
	f.used["name"] = true // read and checked in checkNames
	switch d.kind {
	case KindSchema:
		l.decodeSchema(d, f)
	case KindModule:
		l.decodeModule(d, f)
	case KindWorkflow:
		l.decodeWorkflow(d, f)
	case KindEffect:
		l.decodeEffect(d, f)
	case KindManifest:
		l.decodeManifest(d, f)
	}
	f.finish()
}

func (l *loader) decodeSchema(d *rawDef, f *fields) {
	sd := &SchemaDef{}
	sd.Name = d.name
	doc, hasDoc := f.get("schema", false)
	variant, hasVariant := f.get("variant", false)
	switch {
	case hasDoc && hasVariant:
		l.bad(d, "", "give exactly one of \"schema\" and \"variant\", not both")
	case !hasDoc && !hasVariant:
		l.bad(d, "", "missing \"schema\" (a JSON Schema document) or \"variant\" (an object of arm tag -> schema name)")
	case hasDoc:
		switch doc.(type) {
		case map[string]any, bool:
			sd.Schema = json.RawMessage(canonicalJSON(doc))
			d.doc = doc
		default:
			l.bad(d, "/schema", "\"schema\" must be a JSON Schema object (or true/false), found %s", jsonType(doc))
		}
	case hasVariant:
		vf := l.fieldsOf(d, "/variant", variant, "\"variant\"")
		if vf == nil {
			break
		}
		if len(vf.m) == 0 {
			l.bad(d, "/variant", "\"variant\" must declare at least one arm")
		}
		// Arms are kept in tag order: the canonical form of the def (and so its
		// hash) does not record declaration order, so nothing may depend on it.
		for _, tag := range slices.Sorted(maps.Keys(vf.m)) {
			vf.used[tag] = true
			p := ptrJoin("/variant", tag)
			if !tagRe.MatchString(tag) {
				l.bad(d, p, "arm tag %q must be an identifier (letters, digits, _; not starting with a digit)", tag)
			}
			s, ok := vf.m[tag].(string)
			if !ok || s == "" {
				l.bad(d, p, "arm %q must name a schema (a non-empty string), found %s", tag, jsonType(vf.m[tag]))
				continue
			}
			sd.Variant = append(sd.Variant, schemas.Arm{Tag: tag, Schema: s})
		}
	}
	d.schema = sd
}

func (l *loader) decodeModule(d *rawDef, f *fields) {
	md := &ModuleDef{Name: d.name}
	d.module = md
	rf := f.object("runtime", true)
	if rf == nil {
		d.bad = true
		return
	}
	rt := &md.Runtime
	rt.Kind = rf.str("kind", true)
	switch rt.Kind {
	case "builtin":
		rt.Builtin = rf.str("builtin", true)
		rt.Identity = rf.str("identity", true)
		for _, k := range []string{"artifact", "hash", "max_memory_mib", "source"} {
			if _, ok := rf.m[k]; ok {
				rf.used[k] = true
				l.bad(d, ptrJoin("/runtime", k), "%q is only for wasm modules; a builtin module names its Go implementation in \"builtin\" and its code identity in \"identity\"", k)
			}
		}
	case "wasm":
		rt.Artifact = rf.str("artifact", true)
		rt.ArtifactHash = rf.str("hash", true)
		rt.Source = rf.str("source", false)
		if n, ok := rf.integer("max_memory_mib", false); ok {
			if n < 1 || n > MaxModuleMemoryMiB {
				l.bad(d, "/runtime/max_memory_mib", "\"max_memory_mib\" must be between 1 and %d, found %d", MaxModuleMemoryMiB, n)
			} else {
				rt.MaxMemoryMiB = uint32(n)
			}
		}
		for _, k := range []string{"builtin", "identity"} {
			if _, ok := rf.m[k]; ok {
				rf.used[k] = true
				l.bad(d, ptrJoin("/runtime", k), "%q is only for builtin modules; a wasm module names its \"artifact\" and \"hash\"", k)
			}
		}
	case "":
		d.bad = true
	default:
		l.bad(d, "/runtime/kind", "runtime kind %q is not \"builtin\" or \"wasm\"", rt.Kind)
		for _, k := range []string{"builtin", "identity", "artifact", "hash", "source", "max_memory_mib"} {
			rf.used[k] = true
		}
		d.bad = true
	}
	rf.finish()
}

func (l *loader) decodeWorkflow(d *rawDef, f *fields) {
	w := &WorkflowDef{Name: d.name}
	d.workflow = w
	w.State = f.str("state", true)
	w.Event = f.str("event", true)
	w.Context = f.str("context", false)
	w.Annotations = f.str("annotations", false)
	w.KeySchema = f.str("key_schema", false)
	w.EffectsEmitted = f.strList("effects_emitted", true)
	if w.EffectsEmitted == nil {
		w.EffectsEmitted = []string{}
	}
	if inf := f.object("impl", true); inf != nil {
		w.Impl.Module = inf.str("module", true)
		w.Impl.Entrypoint = inf.str("entrypoint", true)
		inf.finish()
	}
	if mf := f.object("migrate", false); mf != nil {
		w.Migrate = &Migration{Entrypoint: mf.str("entrypoint", true), From: mf.strList("from", true)}
		mf.finish()
	}
}

func (l *loader) decodeEffect(d *rawDef, f *fields) {
	e := &EffectDef{Name: d.name}
	d.effect = e
	e.Params = f.str("params", true)
	e.Receipt = f.str("receipt", true)
	rf := f.object("retry", false)
	if rf == nil {
		return
	}
	r := &RetryPolicy{}
	n, okN := rf.integer("max_attempts", true)
	ib, okI := rf.integer("initial_backoff_ms", true)
	mb, okM := rf.integer("max_backoff_ms", true)
	rf.finish()
	r.MaxAttempts, r.InitialBackoffMs, r.MaxBackoffMs = int(n), ib, mb
	if okN && (n < 1 || n > maxRetryAttempts) {
		l.bad(d, "/retry/max_attempts", "max_attempts %d must be between 1 and %d (1 means no retries)", n, maxRetryAttempts)
	}
	if okI && (ib < 0 || ib > maxBackoffMs) {
		l.bad(d, "/retry/initial_backoff_ms", "initial_backoff_ms %d must be between 0 and %d (24h)", ib, maxBackoffMs)
	}
	if okM && (mb < 0 || mb > maxBackoffMs) {
		l.bad(d, "/retry/max_backoff_ms", "max_backoff_ms %d must be between 0 and %d (24h)", mb, maxBackoffMs)
	} else if okI && okM && ib >= 0 && mb < ib {
		l.bad(d, "/retry/max_backoff_ms", "max_backoff_ms %d is less than initial_backoff_ms %d", mb, ib)
	}
	if okN && okI && n > 1 && ib == 0 {
		l.bad(d, "/retry/initial_backoff_ms", "initial_backoff_ms must be positive when max_attempts > 1, or retries would spin")
	}
	e.Retry = r
}

// Limits on retry policies: beyond these a policy is a mistake, not a plan.
const (
	maxRetryAttempts = 100
	maxBackoffMs     = 24 * 60 * 60 * 1000
)

func (l *loader) decodeManifest(d *rawDef, f *fields) {
	r := &Routing{Subscriptions: []Subscription{}}
	d.routing = r
	rf := f.object("routing", false)
	if rf == nil {
		return
	}
	v, ok := rf.get("subscriptions", true)
	rf.finish()
	if !ok {
		return
	}
	subs, isArr := v.([]any)
	if !isArr {
		l.bad(d, "/routing/subscriptions", "\"subscriptions\" must be an array, found %s", jsonType(v))
		return
	}
	for i, sv := range subs {
		sf := l.fieldsOf(d, "/routing/subscriptions/"+strconv.Itoa(i), sv, "a subscription")
		if sf == nil {
			r.Subscriptions = append(r.Subscriptions, Subscription{}) // keep indexes aligned with pointers
			continue
		}
		s := Subscription{
			Event:    sf.str("event", true),
			Workflow: sf.str("workflow", true),
			KeyField: sf.str("key_field", false),
		}
		sf.finish()
		r.Subscriptions = append(r.Subscriptions, s)
	}
}

// routingValue is the canonical shape of a routing table inside the manifest hash.
func routingValue(r Routing) map[string]any {
	subs := make([]any, len(r.Subscriptions))
	for i, s := range r.Subscriptions {
		m := map[string]any{"event": s.Event, "workflow": s.Workflow}
		if s.KeyField != "" {
			m["key_field"] = s.KeyField
		}
		subs[i] = m
	}
	return map[string]any{"subscriptions": subs}
}

func kindList() string {
	ks := []string{KindSchema, KindModule, KindWorkflow, KindEffect, KindManifest}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
