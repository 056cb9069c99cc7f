package schemas

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"reflect"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// The fast path of Validate.
//
// Validate's general path decodes the CBOR into maps, re-encodes it to check
// canonical form, builds the JSON-model view and runs the jsonschema
// validator, which turns every number into a big.Rat through fmt.Sprint.
// For a schema that uses only a common subset of keywords, Define also builds
// a plan: a specialised validator that walks the canonical CBOR bytes once,
// checking canonical form and the schema together, without allocating.
//
// A plan only ever answers "valid" or "unsure". Unsure covers every invalid
// value and everything rare (floats, tags, deep nesting, ...): Validate then
// runs the general path, which gives the verdict and the error message. So
// the one property the fast path must keep is: it never calls valid a value
// the general path refuses. To keep it safe by construction a plan is built
// from the compiled schema, not the document: each subschema is checked with
// reflection to use no field of jsonschema.Schema outside the subset, so a
// keyword the plan does not implement (or one a new library version adds)
// means no plan at all.
//
// The subset: type, properties, required, additionalProperties (bool or
// schema), min/maxProperties, items (one schema), min/maxItems,
// min/maxLength, pattern (the library's own compiled regexp), integer
// bounds minimum/maximum/exclusiveMinimum/exclusiveMaximum (integral bounds
// within the CBOR integer range), enum and const (integers, strings, booleans
// and null), contentEncoding base64, "$ref" that is the schema's only
// keyword, true/false schemas, and the variant defs prepareVariant generates.

// maxFastDepth bounds the nesting the fast path walks (the decoder allows 64).
const maxFastDepth = 32

// maxFastElems bounds one container's length (the decoder allows 1<<20).
const maxFastElems = 1 << 16

// Types a plan allows, as bits; zero allows every type.
const (
	tyNull uint8 = 1 << iota
	tyBoolean
	tyObject
	tyArray
	tyNumber
	tyInteger
	tyString
)

var typeBits = map[string]uint8{"null": tyNull, "boolean": tyBoolean, "object": tyObject,
	"array": tyArray, "number": tyNumber, "integer": tyInteger, "string": tyString}

// cborInt is a CBOR integer as its major type says it: mag for a
// non-negative one, -1-mag for a negative one.
type cborInt struct {
	neg bool
	mag uint64
}

func (a cborInt) cmp(b cborInt) int {
	switch {
	case a.neg != b.neg:
		if a.neg {
			return -1
		}
		return 1
	case a.mag == b.mag:
		return 0
	case (a.mag < b.mag) != a.neg:
		return -1
	}
	return 1
}

// ratInt converts an integral big.Rat within the CBOR integer range.
func ratInt(r *big.Rat) (cborInt, bool) {
	if r == nil || !r.IsInt() {
		return cborInt{}, false
	}
	n := r.Num()
	if n.Sign() >= 0 {
		return cborInt{mag: n.Uint64()}, n.IsUint64()
	}
	m := new(big.Int).Neg(n)
	m.Sub(m, big.NewInt(1))
	return cborInt{neg: true, mag: m.Uint64()}, m.IsUint64()
}

// bound is one integer bound: value >= v (or > v when excl) for a lower
// bound, value <= v (or < v) for an upper one.
type bound struct {
	lower, excl bool
	v           cborInt
}

func (b bound) holds(x cborInt) bool {
	c := x.cmp(b.v)
	if b.lower {
		c = -c
	}
	return c < 0 || (c == 0 && !b.excl)
}

// Kinds of scalar an enum or const may hold.
const (
	scNull = iota
	scBool
	scInt
	scText
)

type scalar struct {
	kind uint8
	b    bool
	i    cborInt
	s    string
}

// scalarOf converts an enum or const item; ok is false for an item no value
// the fast path accepts can equal (objects, arrays, non-integral or huge
// numbers): dropping it only makes the fast path say unsure more often.
func scalarOf(v any) (scalar, bool) {
	switch t := v.(type) {
	case nil:
		return scalar{kind: scNull}, true
	case bool:
		return scalar{kind: scBool, b: t}, true
	case string:
		return scalar{kind: scText, s: t}, true
	case json.Number:
		r, ok := new(big.Rat).SetString(string(t))
		if !ok {
			return scalar{}, false
		}
		i, ok := ratInt(r)
		return scalar{kind: scInt, i: i}, ok
	}
	return scalar{}, false
}

// scalars is an enum (any item may match) or a const (one item); a set
// whose items were all dropped matches nothing.
type scalars struct {
	on    bool
	items []scalar
}

func (ss *scalars) matchText(b []byte) bool {
	if !ss.on {
		return true
	}
	for _, it := range ss.items {
		if it.kind == scText && it.s == string(b) {
			return true
		}
	}
	return false
}

func (ss *scalars) matchInt(x cborInt) bool {
	if !ss.on {
		return true
	}
	for _, it := range ss.items {
		if it.kind == scInt && it.i == x {
			return true
		}
	}
	return false
}

func (ss *scalars) matchBool(b bool) bool {
	if !ss.on {
		return true
	}
	for _, it := range ss.items {
		if it.kind == scBool && it.b == b {
			return true
		}
	}
	return false
}

func (ss *scalars) matchNull() bool {
	if !ss.on {
		return true
	}
	for _, it := range ss.items {
		if it.kind == scNull {
			return true
		}
	}
	return false
}

// plan validates a value at one schema location. The zero-constraint plan
// anyPlan stands for a location without a schema (or with true or {}).
type plan struct {
	never bool  // the false schema
	types uint8 // allowed types; 0 for any
	b64   bool  // strings here are byte strings

	minLen, maxLen int // -1 when absent
	pattern        *regexp.Regexp
	bounds         []bound
	enum, konst    scalars

	keys               []keyPlan // properties and required names, by encoded key
	required           int       // how many keys entries are required
	closed             bool      // additionalProperties false
	extra              *plan     // schema of other properties
	minProps, maxProps int

	items              *plan
	minItems, maxItems int

	arms []armPlan // a variant: exactly {"$tag": arm tag, "$value": arm value}
}

type keyPlan struct {
	enc      []byte // the key as canonical CBOR text
	plan     *plan  // nil when the name is required but not in properties
	required bool
}

type armPlan struct {
	tag  string
	plan *plan
}

// anyPlan constrains nothing, below it either, and allows no byte strings.
var anyPlan = func() *plan {
	p := &plan{minLen: -1, maxLen: -1, minProps: -1, maxProps: -1, minItems: -1, maxItems: -1}
	p.extra, p.items = p, p
	return p
}()

func newPlan() *plan {
	return &plan{minLen: -1, maxLen: -1, minProps: -1, maxProps: -1, minItems: -1, maxItems: -1,
		extra: anyPlan, items: anyPlan}
}

// encodeText returns the canonical CBOR encoding of a text string.
func encodeText(s string) []byte { return canon.AppendText(nil, s) }

// Fields of jsonschema.Schema a plan implements (or that only matter
// together with one it refuses), and the values the library gives absent
// integer keywords. Every other field must be its zero value.
var (
	planFields = fieldSet("Location", "Draft", "Always", "Types", "Constant", "Enum",
		"MinProperties", "MaxProperties", "Required", "Properties", "AdditionalProperties",
		"MinItems", "MaxItems", "Items", "Items2020", "ContainsEval", "MinContains", "MaxContains",
		"MinLength", "MaxLength", "Pattern", "ContentEncoding",
		"Minimum", "ExclusiveMinimum", "Maximum", "ExclusiveMaximum",
		"Title", "Description", "Default", "Comment", "ReadOnly", "WriteOnly", "Examples", "Deprecated")
	aliasFields = fieldSet("Location", "Draft", "Ref",
		"ContainsEval", "MinContains", "MaxContains",
		"Title", "Description", "Default", "Comment", "ReadOnly", "WriteOnly", "Examples", "Deprecated")
	variantFields = fieldSet("Location", "Draft", "Types", "Required", "Properties", "AdditionalProperties", "AllOf",
		"ContainsEval", "MinContains", "MaxContains")
	fieldDefaults = map[string]int64{"MinProperties": -1, "MaxProperties": -1, "MinItems": -1, "MaxItems": -1,
		"MinContains": 1, "MaxContains": -1, "MinLength": -1, "MaxLength": -1}
)

func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		if _, ok := reflect.TypeFor[jsonschema.Schema]().FieldByName(n); !ok {
			panic("schemas: jsonschema.Schema has no field " + n)
		}
		m[n] = true
	}
	return m
}

// onlyFields reports whether s sets no exported field outside allowed.
// Unexported fields mirror exported ones (format, decoder, enumError, ...).
func onlyFields(s *jsonschema.Schema, allowed map[string]bool) bool {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || allowed[f.Name] {
			continue
		}
		fv := v.Field(i)
		if d, ok := fieldDefaults[f.Name]; ok {
			if fv.Int() != d {
				return false
			}
			continue
		}
		if !fv.IsZero() {
			return false
		}
	}
	return true
}

// planBuilder builds the plan of one def. A failure anywhere below the root
// means no plan for the def; plans are never shared between defs, so a
// half-built node cannot leak into another def's plan.
type planBuilder struct {
	variants map[string][]Arm // variant defs by name
	memo     map[*jsonschema.Schema]*plan
}

func buildPlan(root *jsonschema.Schema, variants map[string][]Arm) *plan {
	b := planBuilder{variants: variants, memo: map[*jsonschema.Schema]*plan{}}
	p, ok := b.build(root)
	if !ok {
		return nil
	}
	return p
}

func (b *planBuilder) build(s *jsonschema.Schema) (*plan, bool) {
	if s == nil {
		return anyPlan, true
	}
	// A "$ref" alone stands for its target: the validator checks the target
	// in place, and the bytes walk adds nothing of the alias's own.
	for hops := 0; s.Ref != nil; hops++ {
		if hops > 16 || !onlyFields(s, aliasFields) {
			return nil, false
		}
		s = s.Ref
	}
	if p, ok := b.memo[s]; ok {
		return p, true // done, or in progress on a recursive schema
	}
	if arms := b.variantArms(s); arms != nil {
		return b.variant(s, arms)
	}
	if !onlyFields(s, planFields) {
		return nil, false
	}
	if s.Always != nil {
		if *s.Always {
			return anyPlan, true
		}
		return &plan{never: true}, true
	}
	for _, n := range []int{s.MinLength, s.MaxLength, s.MinItems, s.MaxItems, s.MinProperties, s.MaxProperties} {
		if n < -1 {
			return nil, false // the meta-schema refuses these; an overflowed huge one lands here
		}
	}
	p := newPlan()
	b.memo[s] = p
	for _, t := range s.Types {
		bit, ok := typeBits[t]
		if !ok {
			return nil, false
		}
		p.types |= bit
	}
	switch s.ContentEncoding {
	case "":
	case "base64":
		p.b64 = true
	default:
		return nil, false
	}
	p.minLen, p.maxLen, p.pattern = s.MinLength, s.MaxLength, s.Pattern
	for _, r := range []struct {
		rat         *big.Rat
		lower, excl bool
	}{{s.Minimum, true, false}, {s.ExclusiveMinimum, true, true}, {s.Maximum, false, false}, {s.ExclusiveMaximum, false, true}} {
		if r.rat == nil {
			continue
		}
		v, ok := ratInt(r.rat)
		if !ok {
			return nil, false
		}
		p.bounds = append(p.bounds, bound{lower: r.lower, excl: r.excl, v: v})
	}
	if s.Enum != nil {
		p.enum.on = true
		for _, e := range s.Enum {
			if sc, ok := scalarOf(e); ok {
				p.enum.items = append(p.enum.items, sc)
			}
		}
	}
	if len(s.Constant) > 0 {
		p.konst.on = true
		if sc, ok := scalarOf(s.Constant[0]); ok {
			p.konst.items = []scalar{sc}
		}
	}
	if !b.object(p, s) || !b.array(p, s) {
		return nil, false
	}
	return p, true
}

func (b *planBuilder) object(p *plan, s *jsonschema.Schema) bool {
	p.minProps, p.maxProps = s.MinProperties, s.MaxProperties
	byName := map[string]*keyPlan{}
	for name, sub := range s.Properties {
		c, ok := b.build(sub)
		if !ok {
			return false
		}
		byName[name] = &keyPlan{enc: encodeText(name), plan: c}
	}
	for _, name := range s.Required {
		k := byName[name]
		if k == nil {
			k = &keyPlan{enc: encodeText(name)}
			byName[name] = k
		}
		if !k.required {
			k.required = true
			p.required++
		}
	}
	for _, k := range byName {
		p.keys = append(p.keys, *k)
	}
	sortKeys(p.keys)
	switch ap := s.AdditionalProperties.(type) {
	case nil:
		p.extra = anyPlan
	case bool:
		p.closed = !ap
		p.extra = anyPlan
	case *jsonschema.Schema:
		c, ok := b.build(ap)
		if !ok {
			return false
		}
		p.extra = c
	default:
		return false
	}
	return true
}

func sortKeys(ks []keyPlan) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && bytes.Compare(ks[j-1].enc, ks[j].enc) > 0; j-- {
			ks[j-1], ks[j] = ks[j], ks[j-1]
		}
	}
}

func (b *planBuilder) array(p *plan, s *jsonschema.Schema) bool {
	p.minItems, p.maxItems = s.MinItems, s.MaxItems
	var items *jsonschema.Schema
	switch it := s.Items.(type) {
	case nil:
		items = s.Items2020
	case *jsonschema.Schema:
		if s.Items2020 != nil {
			return false
		}
		items = it
	default:
		return false // tuple form
	}
	c, ok := b.build(items)
	p.items = c
	return ok
}

// variantArms returns the arms of the variant def whose root s is, or nil.
func (b *planBuilder) variantArms(s *jsonschema.Schema) []Arm {
	loc, ok := strings.CutPrefix(s.Location, schemaURLPrefix)
	if !ok {
		return nil
	}
	name, ok := strings.CutSuffix(loc, "#")
	if !ok {
		return nil
	}
	return b.variants[name]
}

// variant builds the plan of a variant def after checking that its compiled
// schema has exactly the shape prepareVariant writes.
func (b *planBuilder) variant(s *jsonschema.Schema, arms []Arm) (*plan, bool) {
	p := newPlan()
	p.types = tyObject
	b.memo[s] = p
	tagS, valS := s.Properties["$tag"], s.Properties["$value"]
	if !onlyFields(s, variantFields) || len(s.Types) != 1 || s.Types[0] != "object" ||
		len(s.Required) != 2 || s.Required[0] != "$tag" || s.Required[1] != "$value" ||
		s.AdditionalProperties != false || len(s.Properties) != 2 || tagS == nil || valS == nil ||
		!onlyFields(tagS, fieldSet("Location", "Draft", "Enum", "ContainsEval", "MinContains", "MaxContains")) ||
		len(tagS.Enum) != len(arms) || valS.Always == nil || !*valS.Always || len(s.AllOf) != len(arms) {
		return nil, false
	}
	for i, a := range arms {
		c := s.AllOf[i]
		if tagS.Enum[i] != a.Tag || c.If == nil || c.Then == nil || c.Else != nil {
			return nil, false
		}
		ifTag, thenVal := c.If.Properties["$tag"], c.Then.Properties["$value"]
		if ifTag == nil || len(c.If.Properties) != 1 || len(ifTag.Constant) != 1 || ifTag.Constant[0] != a.Tag ||
			thenVal == nil || len(c.Then.Properties) != 1 || thenVal.Ref == nil ||
			thenVal.Ref.Location != schemaURL(a.Schema)+"#" {
			return nil, false
		}
		ap, ok := b.build(thenVal)
		if !ok {
			return nil, false
		}
		p.arms = append(p.arms, armPlan{tag: a.Tag, plan: ap})
	}
	return p, true
}

// fastCheck walks canonical CBOR against a plan. Every method returns false
// for unsure.
type fastCheck struct {
	data []byte
	pos  int
	buf  []byte // base64 text of a byte string, for pattern
}

// accepts reports whether data is certainly canonical CBOR valid against p.
func (p *plan) accepts(data []byte) bool {
	c := fastCheck{data: data}
	return c.value(p, 0) && c.pos == len(data)
}

// head reads an item head in shortest form and returns its major type and
// argument. Indefinite lengths, reserved values, truncation and major type
// 7 (whose heads are not integers) are unsure.
func (c *fastCheck) head() (major byte, arg uint64, ok bool) {
	major, arg, next, ok := canon.Head(c.data, c.pos)
	if !ok || major == canon.MajorSimple || next-c.pos != canon.HeadLen(arg) {
		return 0, 0, false
	}
	c.pos = next
	return major, arg, true
}

// str reads the payload of a string whose head gave length n.
func (c *fastCheck) str(n uint64) ([]byte, bool) {
	if n > uint64(len(c.data)-c.pos) {
		return nil, false
	}
	s := c.data[c.pos : c.pos+int(n)]
	c.pos += int(n)
	return s, true
}

func (p *plan) allows(t uint8) bool { return p.types == 0 || p.types&t != 0 }

func (c *fastCheck) value(p *plan, depth int) bool {
	if p.never || c.pos >= len(c.data) {
		return false
	}
	if p.arms != nil {
		return c.variant(p, depth)
	}
	switch c.data[c.pos] {
	case canon.False, canon.True:
		b := c.data[c.pos] == canon.True
		c.pos++
		return p.allows(tyBoolean) && p.enum.matchBool(b) && p.konst.matchBool(b)
	case canon.Null:
		c.pos++
		return p.allows(tyNull) && p.enum.matchNull() && p.konst.matchNull()
	}
	major, arg, ok := c.head()
	if !ok {
		return false
	}
	switch major {
	case canon.MajorUint, canon.MajorNeg:
		return c.integer(p, cborInt{neg: major == canon.MajorNeg, mag: arg})
	case canon.MajorBytes:
		s, ok := c.str(arg)
		return ok && c.bytes(p, s)
	case canon.MajorText:
		s, ok := c.str(arg)
		return ok && utf8.Valid(s) && c.text(p, s)
	case canon.MajorArray:
		return c.array(p, arg, depth)
	case canon.MajorMap:
		return c.object(p, arg, depth)
	}
	return false // tags
}

func (c *fastCheck) integer(p *plan, x cborInt) bool {
	if !p.allows(tyInteger | tyNumber) {
		return false
	}
	for _, b := range p.bounds {
		if !b.holds(x) {
			return false
		}
	}
	return p.enum.matchInt(x) && p.konst.matchInt(x)
}

func (c *fastCheck) text(p *plan, s []byte) bool {
	if p.b64 || !p.allows(tyString) || !p.enum.matchText(s) || !p.konst.matchText(s) {
		return false
	}
	if p.minLen != -1 || p.maxLen != -1 {
		n := utf8.RuneCount(s)
		if (p.minLen != -1 && n < p.minLen) || (p.maxLen != -1 && n > p.maxLen) {
			return false
		}
	}
	return p.pattern == nil || p.pattern.Match(s)
}

// bytes checks a byte string, which the validator sees as its standard
// base64 text.
func (c *fastCheck) bytes(p *plan, s []byte) bool {
	if !p.b64 || !p.allows(tyString) || p.enum.on || p.konst.on {
		return false
	}
	n := base64.StdEncoding.EncodedLen(len(s)) // runes: the text is ASCII
	if (p.minLen != -1 && n < p.minLen) || (p.maxLen != -1 && n > p.maxLen) {
		return false
	}
	if p.pattern == nil {
		return true
	}
	if cap(c.buf) < n {
		c.buf = make([]byte, n, max(n, 64))
	}
	c.buf = c.buf[:n]
	base64.StdEncoding.Encode(c.buf, s)
	return p.pattern.Match(c.buf)
}

func (c *fastCheck) array(p *plan, n uint64, depth int) bool {
	if depth >= maxFastDepth || n > maxFastElems || !p.allows(tyArray) || p.enum.on || p.konst.on ||
		(p.minItems != -1 && n < uint64(p.minItems)) || (p.maxItems != -1 && n > uint64(p.maxItems)) {
		return false
	}
	for range n {
		if !c.value(p.items, depth+1) {
			return false
		}
	}
	return true
}

// key reads a map key: a text string, returned with its head, that sorts
// strictly after prev.
func (c *fastCheck) key(prev []byte) ([]byte, bool) {
	start := c.pos
	major, n, ok := c.head()
	if !ok || major != canon.MajorText {
		return nil, false
	}
	s, ok := c.str(n)
	if !ok || !utf8.Valid(s) {
		return nil, false
	}
	enc := c.data[start:c.pos]
	return enc, prev == nil || bytes.Compare(prev, enc) < 0
}

func (c *fastCheck) object(p *plan, n uint64, depth int) bool {
	if depth >= maxFastDepth || n > maxFastElems || !p.allows(tyObject) || p.enum.on || p.konst.on ||
		(p.minProps != -1 && n < uint64(p.minProps)) || (p.maxProps != -1 && n > uint64(p.maxProps)) {
		return false
	}
	var prev []byte
	j, required := 0, 0
	for range n {
		enc, ok := c.key(prev)
		if !ok {
			return false
		}
		prev = enc
		// Keys arrive in the order p.keys is sorted in: one merge pass.
		for j < len(p.keys) && bytes.Compare(p.keys[j].enc, enc) < 0 {
			j++
		}
		sub := p.extra
		if j < len(p.keys) && bytes.Equal(p.keys[j].enc, enc) {
			if p.keys[j].required {
				required++
			}
			if p.keys[j].plan != nil {
				sub = p.keys[j].plan
			} else if p.closed {
				return false
			}
		} else if p.closed {
			return false
		}
		if !c.value(sub, depth+1) {
			return false
		}
	}
	return required == p.required
}

// Encoded keys of a variant value, in canonical order.
var (
	encTagKey   = encodeText("$tag")
	encValueKey = encodeText("$value")
)

func (c *fastCheck) variant(p *plan, depth int) bool {
	if depth >= maxFastDepth {
		return false
	}
	major, n, ok := c.head()
	if !ok || major != canon.MajorMap || n != 2 {
		return false
	}
	if !bytes.HasPrefix(c.data[c.pos:], encTagKey) {
		return false
	}
	c.pos += len(encTagKey)
	major, n, ok = c.head()
	if !ok || major != canon.MajorText {
		return false
	}
	tag, ok := c.str(n)
	if !ok || !utf8.Valid(tag) {
		return false
	}
	if !bytes.HasPrefix(c.data[c.pos:], encValueKey) {
		return false
	}
	c.pos += len(encValueKey)
	for _, a := range p.arms {
		if a.tag == string(tag) {
			return c.value(a.plan, depth+1)
		}
	}
	return false
}
