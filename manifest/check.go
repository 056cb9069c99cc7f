package manifest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/schemas"
)

// check enforces every cross-def rule (DESIGN.md §4) and compiles the schemas.
func (l *loader) check(where string) {
	l.checkNames(where)
	l.sysSchemas = map[string]bool{}
	for _, n := range schemas.SysNames() {
		l.sysSchemas[n] = true
	}
	for _, d := range l.defs {
		switch d.kind {
		case KindSchema:
			l.checkSchema(d)
		case KindModule:
			l.checkModule(d)
		case KindEffect:
			l.checkEffect(d)
		case KindWorkflow:
			l.checkWorkflow(d)
		}
	}
	if l.manifest != nil {
		l.checkRouting(l.manifest)
	}
	l.compileSchemas()
}

// checkNames checks def names, sys/ reservations, duplicates and that there is
// exactly one manifest def.
func (l *loader) checkNames(where string) {
	for _, d := range l.defs {
		v, ok := d.value["name"]
		_, isStr := v.(string)
		switch {
		case !ok:
			l.bad(d, "", "missing required field \"name\"")
		case !isStr:
			l.bad(d, "/name", "\"name\" must be a string, found %s", jsonType(v))
		}
		if !isStr {
			if d.kind == KindManifest && l.manifest == nil {
				l.manifest = d // still check its routing; "no manifest def" would mislead
			}
			continue
		}
		if d.kind == KindManifest {
			if !isManifestName(d.name) {
				l.bad(d, "/name", "manifest name %q is not of the form namespace/name (e.g. com.acme/shop)", d.name)
			}
			if l.manifest != nil {
				l.bad(d, "", "more than one \"manifest\" def: the first is in %s at %s", l.manifest.file, displayPtr(l.manifest.ptr))
				continue
			}
			l.manifest = d
			continue
		}
		switch {
		case !IsDefName(d.name):
			l.bad(d, "/name", "name %q is not of the form namespace/name@N (e.g. com.acme/OrderEvent@1)", d.name)
		case strings.HasPrefix(d.name, "sys/"):
			l.bad(d, "/name", "names under sys/ are built in and cannot be redefined")
			continue
		}
		if first, dup := l.byName[d.name]; dup {
			l.bad(d, "/name", "duplicate def name: already declared as a %s in %s at %s", first.kind, first.file, displayPtr(first.ptr))
			continue
		}
		l.byName[d.name] = d
	}
	if l.manifest == nil && !l.unreadable {
		l.c.addf(where, "", "", "no \"$kind\": \"manifest\" def: exactly one is required (it names the world and holds its routing)")
	}
}

// userDef returns the def called name if it has the wanted kind.
func (l *loader) userDef(name, kind string) *rawDef {
	if d := l.byName[name]; d != nil && d.kind == kind {
		return d
	}
	return nil
}

func (l *loader) schemaKnown(name string) bool {
	return l.userDef(name, KindSchema) != nil || l.sysSchemas[name]
}

// refSchema checks that the schema reference at ptr resolves.
func (l *loader) refSchema(d *rawDef, ptr, what, name string) bool {
	if name == "" {
		return false
	}
	if l.schemaKnown(name) {
		return true
	}
	l.bad(d, ptr, "%s %s: %s", what, name, l.unknownMsg(name, KindSchema))
	return false
}

// unknownMsg explains why name does not resolve to a def of kind.
func (l *loader) unknownMsg(name, kind string) string {
	if other := l.byName[name]; other != nil {
		return fmt.Sprintf("is a %s, not a %s", other.kind, kind)
	}
	if strings.HasPrefix(name, "sys/") {
		return fmt.Sprintf("no such built-in %s", kind)
	}
	if !IsDefName(name) {
		return fmt.Sprintf("not a def name (namespace/name@N) and no %s has it", kind)
	}
	return fmt.Sprintf("no %s with this name in the manifest", kind)
}

// arms returns the arms of variant schema name, or nil if it is not a
// variant. No built-in sys/ schema is a variant.
func (l *loader) arms(name string) []schemas.Arm {
	if d := l.userDef(name, KindSchema); d != nil {
		return d.schema.Variant
	}
	return nil
}

func (l *loader) checkSchema(d *rawDef) {
	for _, a := range d.schema.Variant {
		l.refSchema(d, ptrJoin("/variant", a.Tag), "arm "+a.Tag+": schema", a.Schema)
	}
}

func (l *loader) checkModule(d *rawDef) {
	rt := &d.module.Runtime
	if rt.Kind != "wasm" || rt.Artifact == "" || rt.ArtifactHash == "" {
		return
	}
	want, err := schemas.ParseHash(rt.ArtifactHash)
	if err != nil {
		l.bad(d, "/runtime/hash", "\"hash\" %q is not sha256:<64 lower-case hex digits>", rt.ArtifactHash)
		return
	}
	if want.String() != rt.ArtifactHash {
		l.bad(d, "/runtime/hash", "\"hash\" must be written in lower-case hex: %s", want)
		return
	}
	b, msg := l.readArtifact(d, rt, want)
	if msg != "" {
		l.bad(d, "/runtime/artifact", "%s", msg)
		return
	}
	if got := schemas.HashBytes(b); got != want {
		fix := fmt.Sprintf("if this artifact is the one you mean, set \"hash\" to %s; else rebuild it", got)
		if rt.Source != "" {
			fix = "rebuild it and pin its hash with: aosd build " + l.root
		}
		l.bad(d, "/runtime/hash", "wasm artifact %s has hash %s but the def declares %s; %s", rt.Artifact, got, want, fix)
		return
	}
	l.artifacts[d] = b
}

func (l *loader) checkEffect(d *rawDef) {
	e := d.effect
	l.refSchema(d, "/params", "params schema", e.Params)
	l.refSchema(d, "/receipt", "receipt schema", e.Receipt)
}

func (l *loader) checkWorkflow(d *rawDef) {
	w := d.workflow
	l.refSchema(d, "/state", "state schema", w.State)
	eventOK := l.refSchema(d, "/event", "event schema", w.Event)
	l.refSchema(d, "/annotations", "annotations schema", w.Annotations)
	l.refSchema(d, "/key_schema", "key schema", w.KeySchema)
	if w.Context != "" && w.Context != SysWorkflowContext {
		l.bad(d, "/context", "context %s: the only workflow context is %s", w.Context, SysWorkflowContext)
	}
	if w.Impl.Module != "" && l.userDef(w.Impl.Module, KindModule) == nil {
		l.bad(d, "/impl/module", "module %s: %s", w.Impl.Module, l.unknownMsg(w.Impl.Module, KindModule))
	}
	l.checkMigration(d, w)
	seen := map[string]int{}
	for i, e := range w.EffectsEmitted {
		ptr := "/effects_emitted/" + strconv.Itoa(i)
		if j, dup := seen[e]; dup {
			l.bad(d, ptr, "effect %s is listed twice (also at /effects_emitted/%d)", e, j)
			continue
		}
		seen[e] = i
		if !IsSysEffect(e) && l.userDef(e, KindEffect) == nil {
			l.bad(d, ptr, "effect %s: %s", e, l.unknownMsg(e, KindEffect))
		}
	}
	// Receipts come back as events: a workflow that emits effects must be
	// able to receive sys/EffectReceiptEnvelope@1, or its first receipt
	// would fail the instance.
	if len(w.EffectsEmitted) > 0 && eventOK && w.Event != SysEffectReceiptEnvelope && !l.hasArm(w.Event, SysEffectReceiptEnvelope) {
		l.bad(d, "/event", "the workflow emits effects but its event schema %s cannot carry their receipts: make it a variant with an arm for %s", w.Event, SysEffectReceiptEnvelope)
	}
}

// checkMigration checks a defworkflow's "migrate": at least one "from"
// schema, each a schema of the manifest, listed once, and not the state
// schema itself (a state that validates against it needs no migration).
func (l *loader) checkMigration(d *rawDef, w *WorkflowDef) {
	if w.Migrate == nil {
		return
	}
	if len(w.Migrate.From) == 0 {
		l.bad(d, "/migrate/from", "\"from\" must name at least one state schema the migration takes")
	}
	seen := map[string]int{}
	for i, s := range w.Migrate.From {
		ptr := "/migrate/from/" + strconv.Itoa(i)
		if j, dup := seen[s]; dup {
			l.bad(d, ptr, "schema %s is listed twice (also at /migrate/from/%d)", s, j)
			continue
		}
		seen[s] = i
		if s == w.State {
			l.bad(d, ptr, "schema %s is the workflow's state schema: a state that validates against it is not migrated", s)
			continue
		}
		l.refSchema(d, ptr, "migration source schema", s)
	}
}

func (l *loader) hasArm(variant, schema string) bool {
	for _, a := range l.arms(variant) {
		if a.Schema == schema {
			return true
		}
	}
	return false
}

func (l *loader) checkRouting(md *rawDef) {
	type subKey struct{ event, workflow, keyField string }
	seen := map[subKey]int{}
	for i, s := range md.routing.Subscriptions {
		ptr := "/routing/subscriptions/" + strconv.Itoa(i)
		if s.Event == "" || s.Workflow == "" {
			continue // already reported while decoding
		}
		k := subKey{s.Event, s.Workflow, s.KeyField}
		if j, dup := seen[k]; dup {
			l.bad(md, ptr, "duplicate subscription: same as /routing/subscriptions/%d; the event would be delivered twice", j)
			continue
		}
		seen[k] = i
		eventOK := l.refSchema(md, ptr+"/event", "event schema", s.Event)
		wd := l.userDef(s.Workflow, KindWorkflow)
		if wd == nil {
			l.bad(md, ptr+"/workflow", "workflow %s: %s", s.Workflow, l.unknownMsg(s.Workflow, KindWorkflow))
			continue
		}
		w := wd.workflow
		if !eventOK || w.Event == "" || !l.schemaKnown(w.Event) {
			continue // the event or the workflow's event is already reported
		}
		wrapTag := ""
		if s.Event != w.Event {
			var tags []string
			for _, a := range l.arms(w.Event) {
				if a.Schema == s.Event {
					tags = append(tags, a.Tag)
				}
			}
			switch len(tags) {
			case 0:
				l.bad(md, ptr+"/event", "event %s cannot be delivered to %s: it is neither the workflow's event schema %s nor an arm of it", s.Event, s.Workflow, w.Event)
				continue
			case 1:
				wrapTag = tags[0]
			default:
				l.bad(md, ptr+"/event", "event %s is arms %s of %s; delivery as one arm would be ambiguous", s.Event, strings.Join(tags, " and "), w.Event)
				continue
			}
		}
		switch {
		case w.Keyed() && s.KeyField == "":
			l.bad(md, ptr, "missing \"key_field\": workflow %s is keyed (key_schema %s), so the subscription must say where the key is in the event", s.Workflow, w.KeySchema)
		case !w.Keyed() && s.KeyField != "":
			l.bad(md, ptr+"/key_field", "key_field %q given but workflow %s has no key_schema (it is not keyed)", s.KeyField, s.Workflow)
		case s.KeyField != "":
			l.checkKeyField(md, ptr+"/key_field", s, wrapTag)
		}
	}
}

// checkKeyField checks the syntax of a key_field and, where the event schema
// declares properties, that the path exists. Like the router, it reads a
// leading "$value." on an arm-wrapped delivery as addressing the event itself.
func (l *loader) checkKeyField(md *rawDef, ptr string, s Subscription, wrapTag string) {
	if !keyFieldRe.MatchString(s.KeyField) {
		l.bad(md, ptr, "key_field %q is not a dotted path of field names (e.g. order_id, $value.note_id, a.b)", s.KeyField)
		return
	}
	path := strings.Split(s.KeyField, ".")
	if wrapTag != "" && len(path) > 1 && path[0] == "$value" {
		path = path[1:]
	}
	if msg := l.pathProblem(s.Event, path, 0); msg != "" {
		l.bad(md, ptr, "key_field %q does not exist in event %s: %s", s.KeyField, s.Event, msg)
	}
}

// maxRefDepth stops key_field checks that follow $ref chains forever.
const maxRefDepth = 32

// pathProblem says why path cannot exist in values of schema name, or "" if
// it may (including when the schema does not declare its properties).
func (l *loader) pathProblem(name string, path []string, depth int) string {
	if len(path) == 0 || depth > maxRefDepth {
		return ""
	}
	d := l.userDef(name, KindSchema)
	if d == nil {
		return "" // sys/ schema: its properties are not declared here
	}
	if len(d.schema.Variant) > 0 {
		switch path[0] {
		case "$tag":
			if len(path) > 1 {
				return "$tag is a string"
			}
			return ""
		case "$value":
			for _, a := range d.schema.Variant {
				if msg := l.pathProblem(a.Schema, path[1:], depth+1); msg != "" {
					return fmt.Sprintf("arm %s (%s): %s", a.Tag, a.Schema, msg)
				}
			}
			return ""
		default:
			return fmt.Sprintf("%s is a variant; its values have only $tag and $value (try \"$value.%s\")", name, strings.Join(path, "."))
		}
	}
	return l.docPathProblem(d.doc, path, depth)
}

func (l *loader) docPathProblem(doc any, path []string, depth int) string {
	m, ok := doc.(map[string]any)
	if !ok || depth > maxRefDepth {
		return ""
	}
	if ref, ok := m["$ref"].(string); ok && IsDefName(ref) {
		return l.pathProblem(ref, path, depth+1)
	}
	props, ok := m["properties"].(map[string]any)
	if !ok {
		return "" // no declared properties: nothing to check against
	}
	sub, ok := props[path[0]]
	if !ok {
		return fmt.Sprintf("no property %q (declared: %s)", path[0], strings.Join(slices.Sorted(maps.Keys(props)), ", "))
	}
	return l.docPathProblem(sub, path[1:], depth+1)
}

// compileSchemas compiles every schema def that decoded cleanly into a fresh
// registry and turns compile errors into problems at the right place.
func (l *loader) compileSchemas() {
	var defs []schemas.SchemaDef
	var names []string
	for _, d := range l.defs {
		if d.kind == KindSchema && l.byName[d.name] == d {
			names = append(names, d.name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		sd := l.byName[n].schema.SchemaDef
		if sd.Schema == nil && len(sd.Variant) == 0 {
			// Malformed and already reported: compile a placeholder so defs
			// that refer to it are not reported as broken too.
			sd.Schema, sd.Variant = []byte("true"), nil
		}
		defs = append(defs, sd)
	}
	reg := schemas.NewRegistry()
	err := reg.Define(defs)
	if err == nil {
		l.registry = reg
		return
	}
	var des schemas.DefErrors
	if !errors.As(err, &des) {
		l.c.addf(l.where(), "", "", "compile schemas: %v", err)
		return
	}
	for _, de := range des {
		d := l.byName[de.Name]
		if d == nil || d.kind != KindSchema {
			l.c.addf(l.where(), de.Name, de.Pointer, "%s", de.Msg)
			continue
		}
		ptr := d.ptr + schemaErrPtr(d, de.Pointer)
		if l.reported(d, ptr) {
			continue // the loader's own check already explained this spot
		}
		l.bad(d, strings.TrimPrefix(ptr, d.ptr), "%s", de.Msg)
	}
}

// schemaErrPtr places a registry error pointer inside the def: pointers that
// already start at a def field are kept, others are inside the schema document.
func schemaErrPtr(d *rawDef, p string) string {
	if p == "" {
		return ""
	}
	for _, f := range []string{"/schema", "/variant", "/name"} {
		if p == f || strings.HasPrefix(p, f+"/") {
			return p
		}
	}
	if len(d.schema.Variant) > 0 {
		return "/variant" + p
	}
	return "/schema" + p
}

// reported reports whether a problem was already recorded at ptr for d.
func (l *loader) reported(d *rawDef, ptr string) bool {
	for _, p := range l.c.ps {
		if p.File == d.file && p.Def == d.name && p.Pointer == ptr {
			return true
		}
	}
	return false
}

func (l *loader) where() string {
	if l.manifest != nil {
		return l.manifest.file
	}
	for f, i := range l.files {
		if i == 0 {
			return f
		}
	}
	return ""
}
