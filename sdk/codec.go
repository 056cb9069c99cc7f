package sdk

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/fxamacker/cbor/v2"
)

// A plan is a compiled codec for one Go type: what Workflow uses instead of
// the library to decode a step's state and event and encode its next state,
// for the plain types most workflows use. compilePlan builds it once, with
// reflect, when the workflow is registered; a step then walks the plan over
// the value's memory. The library's reflection costs a Go wasm guest about
// 6 µs a step on the smallest types; the plan, a fraction of that.
//
// A plan's results are the library's, never its own:
//   - decode accepts only the plain shapes (the right major type, in range,
//     valid UTF-8, definite lengths, text keys, no duplicate keys, within
//     the library's nesting limit, no trailing bytes). On anything else it
//     gives up and the caller decodes with the library into a fresh value,
//     so the value and the error text are the library's.
//   - encode writes what encMode.Marshal writes, byte for byte
//     (TestCodecEncodeMatchesLibrary, FuzzCodecEncodeMatchesLibrary).
type plan struct {
	kind planKind
	typ  reflect.Type
	size uintptr // an integer's width; a slice element's size
	elem *plan   // a pointer's, slice's or map's element
	// fields are a struct's encoded fields in canonical order: by their
	// keys' encoded bytes, shorter first, as core deterministic encoding
	// sorts map keys.
	fields []planField
	// lastLen is the length of the last value encodeState wrote: a size
	// hint, shared by concurrent steps.
	lastLen atomic.Int64
}

type planKind uint8

const (
	planBool planKind = iota
	planInt
	planUint
	planString
	planBytes
	planStruct
	planPtr
	planSlice
	planMap
)

type planField struct {
	name      string
	key       []byte // name as a CBOR text string
	off       uintptr
	omitEmpty bool
	p         *plan
}

// maxPlanFields bounds a struct's fields so decode tracks the ones it has
// seen in one word.
const maxPlanFields = 64

// maxLibraryDepth is the library's MaxNestedLevels (mustDecMode): the top
// container is level 1.
const maxLibraryDepth = 64

// maxLibraryCount is the library's MaxArrayElements and MaxMapPairs.
const maxLibraryCount = 1 << 20

// Interfaces through which the library lets a type encode or decode
// itself: a type that has one is not compiled.
type (
	cborMarshaler   interface{ MarshalCBOR() ([]byte, error) }
	cborUnmarshaler interface{ UnmarshalCBOR([]byte) error }
	jsonMarshaler   interface{ MarshalJSON() ([]byte, error) }
	jsonUnmarshaler interface{ UnmarshalJSON([]byte) error }
)

var selfCoding = []reflect.Type{
	reflect.TypeFor[cborMarshaler](),
	reflect.TypeFor[cborUnmarshaler](),
	reflect.TypeFor[encoding.BinaryMarshaler](),
	reflect.TypeFor[encoding.BinaryUnmarshaler](),
	reflect.TypeFor[encoding.TextMarshaler](),
	reflect.TypeFor[encoding.TextUnmarshaler](),
	reflect.TypeFor[jsonMarshaler](),
	reflect.TypeFor[jsonUnmarshaler](),
	reflect.TypeFor[fastDecoder](),
}

// The library's own types, each handled specially by it (most also have a
// method above, or a field of an unsupported kind; named for certainty).
var libraryTypes = []reflect.Type{
	reflect.TypeFor[RawValue](),
	reflect.TypeFor[cbor.RawMessage](),
	reflect.TypeFor[cbor.RawTag](),
	reflect.TypeFor[cbor.Tag](),
	reflect.TypeFor[cbor.SimpleValue](),
	reflect.TypeFor[cbor.ByteString](),
}

var typeByte = reflect.TypeFor[byte]()

// compilePlan compiles t's codec, or says why t is not a type it compiles.
func compilePlan(t reflect.Type) (*plan, error) {
	return compileType(t, map[reflect.Type]*plan{})
}

// compileType compiles t; seen holds the plans compiled or being compiled,
// so a recursive type refers to its own plan.
func compileType(t reflect.Type, seen map[reflect.Type]*plan) (*plan, error) {
	if p, ok := seen[t]; ok {
		return p, nil
	}
	pt := reflect.PointerTo(t)
	for _, i := range selfCoding {
		if t.Implements(i) || pt.Implements(i) {
			return nil, fmt.Errorf("%s has its own encoding (%s)", t, i)
		}
	}
	if slices.Contains(libraryTypes, t) {
		return nil, fmt.Errorf("%s is encoded specially by the library", t)
	}
	p := &plan{typ: t}
	seen[t] = p
	switch t.Kind() {
	case reflect.Bool:
		p.kind = planBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind, p.size = planInt, t.Size()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		p.kind, p.size = planUint, t.Size()
	case reflect.String:
		p.kind = planString
	case reflect.Pointer:
		p.kind = planPtr
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			// The library writes any slice of a uint8 kind as a byte
			// string; only plain bytes are compiled.
			if t.Elem() != typeByte {
				return nil, fmt.Errorf("%s: a slice of %s", t, t.Elem())
			}
			p.kind = planBytes
			return p, nil
		}
		p.kind, p.size = planSlice, t.Elem().Size()
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key() != reflect.TypeFor[string]() {
			return nil, fmt.Errorf("%s: map keys are not string", t)
		}
		p.kind = planMap
	case reflect.Struct:
		p.kind = planStruct
		if err := compileFields(p, seen); err != nil {
			return nil, err // never a plan half compiled
		}
		return p, nil
	default:
		return nil, fmt.Errorf("%s: kind %s is not compiled", t, t.Kind())
	}
	if p.kind == planPtr || p.kind == planSlice || p.kind == planMap {
		e, err := compileType(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		p.elem = e
	}
	return p, nil
}

// compileFields names p's struct fields by the library's rules
// (fxamacker/cbor structfields.go): the cbor tag, else the json tag, else
// the Go name; "-" skips the field, unexported fields are ignored.
func compileFields(p *plan, seen map[reflect.Type]*plan) error {
	t := p.typ
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return fmt.Errorf("%s.%s: embedded fields are not compiled", t, f.Name)
		}
		tag := f.Tag.Get("cbor")
		if tag == "" {
			tag = f.Tag.Get("json")
		}
		if !f.IsExported() {
			// An unexported field with a tag may carry struct options
			// (`_ struct{} cbor:",toarray"`).
			if f.Tag.Get("cbor") != "" {
				return fmt.Errorf("%s.%s: an unexported field with a cbor tag", t, f.Name)
			}
			continue
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fp := planField{name: name, key: canon.AppendText(nil, name), off: f.Offset}
		for opts != "" {
			var opt string
			opt, opts, _ = strings.Cut(opts, ",")
			if opt != "omitempty" {
				return fmt.Errorf("%s.%s: tag option %q is not compiled", t, f.Name, opt)
			}
			fp.omitEmpty = true
		}
		if names[name] {
			return fmt.Errorf("%s: two fields named %q", t, name)
		}
		names[name] = true
		ft, err := compileType(f.Type, seen)
		if err != nil {
			return err
		}
		if fp.omitEmpty && (f.Type.Kind() == reflect.Struct) {
			// The library's emptiness of a struct depends on its
			// fields' options; not worth mirroring.
			return fmt.Errorf("%s.%s: omitempty on a struct is not compiled", t, f.Name)
		}
		fp.p = ft
		p.fields = append(p.fields, fp)
	}
	if len(p.fields) > maxPlanFields {
		return fmt.Errorf("%s: more than %d fields", t, maxPlanFields)
	}
	slices.SortFunc(p.fields, func(a, b planField) int { return compareKeys(a.key, b.key) })
	return nil
}

// compareKeys orders encoded keys as core deterministic encoding does:
// bytewise (for text keys, shorter first).
func compareKeys(a, b []byte) int { return strings.Compare(string(a), string(b)) }

// sliceHeader is the memory layout of a slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// decode decodes data, one CBOR item, into the zero value at ptr (a *T
// for p's T), and reports whether it did. false means data is not a plain
// shape the plan decodes: the value at ptr is then partly written, and the
// caller decodes with the library into a fresh value.
func (p *plan) decode(data []byte, ptr unsafe.Pointer) bool {
	next, ok := p.decodeAt(data, 0, ptr, 0)
	return ok && next == len(data)
}

// decodeAt decodes the item at b[off] into ptr, depth containers below
// the top, and returns the offset after it.
func (p *plan) decodeAt(b []byte, off int, ptr unsafe.Pointer, depth int) (int, bool) {
	if off >= len(b) {
		return 0, false
	}
	if b[off] == canon.Null {
		// The library leaves a value as it is on null, or sets it to
		// nil; the value here is fresh, so both are the zero value.
		return off + 1, true
	}
	major, arg, next, ok := canon.Head(b, off)
	if !ok {
		return 0, false
	}
	switch p.kind {
	case planBool:
		switch b[off] {
		case canon.False:
			*(*bool)(ptr) = false
		case canon.True:
			*(*bool)(ptr) = true
		default:
			return 0, false
		}
		return next, true
	case planInt:
		var v int64
		switch {
		case major == canon.MajorUint && arg <= math.MaxInt64:
			v = int64(arg)
		case major == canon.MajorNeg && arg <= math.MaxInt64:
			v = ^int64(arg)
		default:
			return 0, false
		}
		return next, storeInt(ptr, p.size, v)
	case planUint:
		if major != canon.MajorUint {
			return 0, false
		}
		return next, storeUint(ptr, p.size, arg)
	case planString:
		if major != canon.MajorText || arg > uint64(len(b)-next) {
			return 0, false
		}
		s := b[next : next+int(arg)]
		if !utf8.Valid(s) {
			return 0, false
		}
		*(*string)(ptr) = string(s) // a copy: the input buffer is reused
		return next + int(arg), true
	case planBytes:
		if major != canon.MajorBytes || arg > uint64(len(b)-next) {
			return 0, false
		}
		s := make([]byte, arg) // never nil, as the library's
		copy(s, b[next:])
		*(*[]byte)(ptr) = s
		return next + int(arg), true
	case planPtr:
		e := reflect.New(p.elem.typ).UnsafePointer()
		if next, ok = p.elem.decodeAt(b, off, e, depth); !ok {
			return 0, false
		}
		*(*unsafe.Pointer)(ptr) = e
		return next, true
	case planSlice:
		if major != canon.MajorArray || !withinLimits(depth, arg, 1, len(b)-next) {
			return 0, false
		}
		n := int(arg)
		s := reflect.MakeSlice(p.typ, n, n).UnsafePointer() // never nil, as the library's
		for i := range n {
			if next, ok = p.elem.decodeAt(b, next, unsafe.Add(s, uintptr(i)*p.size), depth+1); !ok {
				return 0, false
			}
		}
		*(*sliceHeader)(ptr) = sliceHeader{data: s, len: n, cap: n}
		return next, true
	case planMap:
		if major != canon.MajorMap {
			return 0, false
		}
		return p.decodeMap(b, next, arg, ptr, depth)
	case planStruct:
		if major != canon.MajorMap {
			return 0, false
		}
		return p.decodeStruct(b, next, arg, ptr, depth)
	}
	return 0, false
}

// withinLimits says whether a container of n items (of at least size
// bytes each, with rest bytes left) depth levels below the top is within
// the library's limits: nesting, count, and a count the input can hold
// (a longer one is truncated input, and must not size an allocation).
func withinLimits(depth int, n uint64, size, rest int) bool {
	return depth+1 <= maxLibraryDepth && n <= maxLibraryCount && n <= uint64(rest/size)
}

func storeInt(ptr unsafe.Pointer, size uintptr, v int64) bool {
	switch size {
	case 1:
		if v != int64(int8(v)) {
			return false
		}
		*(*int8)(ptr) = int8(v)
	case 2:
		if v != int64(int16(v)) {
			return false
		}
		*(*int16)(ptr) = int16(v)
	case 4:
		if v != int64(int32(v)) {
			return false
		}
		*(*int32)(ptr) = int32(v)
	default:
		*(*int64)(ptr) = v
	}
	return true
}

func storeUint(ptr unsafe.Pointer, size uintptr, v uint64) bool {
	switch size {
	case 1:
		if v > math.MaxUint8 {
			return false
		}
		*(*uint8)(ptr) = uint8(v)
	case 2:
		if v > math.MaxUint16 {
			return false
		}
		*(*uint16)(ptr) = uint16(v)
	case 4:
		if v > math.MaxUint32 {
			return false
		}
		*(*uint32)(ptr) = uint32(v)
	default:
		*(*uint64)(ptr) = v
	}
	return true
}

// textKey reads a map key at b[off], which must be a valid UTF-8 text
// string, and returns it (not copied) and the offset after it.
func textKey(b []byte, off int) ([]byte, int, bool) {
	major, n, next, ok := canon.Head(b, off)
	if !ok || major != canon.MajorText || n > uint64(len(b)-next) {
		return nil, 0, false
	}
	k := b[next : next+int(n)]
	if !utf8.Valid(k) {
		return nil, 0, false
	}
	return k, next + int(n), true
}

// decodeStruct decodes n map pairs from b[off] into the struct at ptr.
// Keys that name no field are skipped, as the library skips them; every
// key, known or not, may occur once (the library's DupMapKeyEnforcedAPF).
func (p *plan) decodeStruct(b []byte, off int, n uint64, ptr unsafe.Pointer, depth int) (int, bool) {
	if !withinLimits(depth, n, 2, len(b)-off) {
		return 0, false
	}
	var found uint64
	var unknownBuf [8][]byte
	unknown := unknownBuf[:0]
	for range n {
		k, next, ok := textKey(b, off)
		if !ok {
			return 0, false
		}
		i := p.field(k)
		if i < 0 {
			for _, u := range unknown {
				if string(u) == string(k) {
					return 0, false
				}
			}
			unknown = append(unknown, k)
			// The skipped value must be what the library accepts too,
			// within its nesting limit counted from the top: a
			// container here would be at level depth+2.
			var pr canon.Problem
			if off, pr = canon.SkipAt(b, next, depth+2, true); pr != canon.OK {
				return 0, false
			}
			continue
		}
		if found&(1<<i) != 0 {
			return 0, false
		}
		found |= 1 << i
		f := &p.fields[i]
		if off, ok = f.p.decodeAt(b, next, unsafe.Add(ptr, f.off), depth+1); !ok {
			return 0, false
		}
	}
	return off, true
}

// field returns the index of the field named k, or -1.
func (p *plan) field(k []byte) int {
	for i := range p.fields {
		if p.fields[i].name == string(k) {
			return i
		}
	}
	return -1
}

// decodeMap decodes n pairs from b[off] into a new map[string]T at ptr.
func (p *plan) decodeMap(b []byte, off int, n uint64, ptr unsafe.Pointer, depth int) (int, bool) {
	if !withinLimits(depth, n, 2, len(b)-off) {
		return 0, false
	}
	m := reflect.MakeMapWithSize(p.typ, int(n)) // never nil, as the library's
	for range n {
		k, next, ok := textKey(b, off)
		if !ok {
			return 0, false
		}
		kv := reflect.ValueOf(string(k))
		if m.MapIndex(kv).IsValid() {
			return 0, false
		}
		e := reflect.New(p.elem.typ)
		if off, ok = p.elem.decodeAt(b, next, e.UnsafePointer(), depth+1); !ok {
			return 0, false
		}
		m.SetMapIndex(kv, e.Elem())
	}
	reflect.NewAt(p.typ, ptr).Elem().Set(m)
	return off, true
}

// encodeState returns the canonical CBOR of the value at ptr in a buffer
// of its own (the step's output keeps it), sized by the last state this
// plan encoded so that a state usually takes one allocation.
func (p *plan) encodeState(ptr unsafe.Pointer) []byte {
	b := p.encode(make([]byte, 0, max(p.lastLen.Load(), 16)), ptr)
	p.lastLen.Store(int64(len(b)))
	return b
}

// encode appends the canonical CBOR of the value at ptr (a *T for p's T)
// to dst: encMode.Marshal's bytes.
func (p *plan) encode(dst []byte, ptr unsafe.Pointer) []byte {
	switch p.kind {
	case planBool:
		return canon.AppendBool(dst, *(*bool)(ptr))
	case planInt:
		v := loadInt(ptr, p.size)
		if v < 0 {
			return canon.AppendHead(dst, canon.MajorNeg, uint64(^v))
		}
		return canon.AppendHead(dst, canon.MajorUint, uint64(v))
	case planUint:
		return canon.AppendHead(dst, canon.MajorUint, loadUint(ptr, p.size))
	case planString:
		// Written as it is, valid UTF-8 or not, as the library writes it.
		return canon.AppendText(dst, *(*string)(ptr))
	case planBytes:
		// A nil slice is null (the library's NilContainerAsNull).
		return canon.AppendBytesOrNull(dst, *(*[]byte)(ptr))
	case planPtr:
		e := *(*unsafe.Pointer)(ptr)
		if e == nil {
			return canon.AppendNull(dst)
		}
		return p.elem.encode(dst, e)
	case planSlice:
		h := (*sliceHeader)(ptr)
		if h.data == nil {
			return canon.AppendNull(dst)
		}
		dst = canon.AppendArray(dst, uint64(h.len))
		for i := range h.len {
			dst = p.elem.encode(dst, unsafe.Add(h.data, uintptr(i)*p.size))
		}
		return dst
	case planMap:
		return p.encodeMap(dst, ptr)
	case planStruct:
		n := 0
		for i := range p.fields {
			if !p.fields[i].omitted(ptr) {
				n++
			}
		}
		dst = canon.AppendMap(dst, uint64(n))
		for i := range p.fields {
			f := &p.fields[i]
			if f.omitted(ptr) {
				continue
			}
			dst = append(dst, f.key...)
			dst = f.p.encode(dst, unsafe.Add(ptr, f.off))
		}
		return dst
	}
	panic("sdk: plan of unknown kind")
}

// omitted says whether f is left out of the struct at ptr: omitempty and
// empty by the library's rule (false, 0, "", a nil pointer, no elements).
func (f *planField) omitted(ptr unsafe.Pointer) bool {
	if !f.omitEmpty {
		return false
	}
	v := unsafe.Add(ptr, f.off)
	switch f.p.kind {
	case planBool:
		return !*(*bool)(v)
	case planInt:
		return loadInt(v, f.p.size) == 0
	case planUint:
		return loadUint(v, f.p.size) == 0
	case planString:
		return len(*(*string)(v)) == 0
	case planBytes:
		return len(*(*[]byte)(v)) == 0
	case planPtr:
		return *(*unsafe.Pointer)(v) == nil
	case planSlice:
		return (*sliceHeader)(v).len == 0
	case planMap:
		return reflect.NewAt(f.p.typ, v).Elem().Len() == 0
	}
	return false // structs: omitempty on them is not compiled
}

func (p *plan) encodeMap(dst []byte, ptr unsafe.Pointer) []byte {
	m := reflect.NewAt(p.typ, ptr).Elem()
	if m.IsNil() {
		return canon.AppendNull(dst)
	}
	keys := make([]string, 0, m.Len())
	for it := m.MapRange(); it.Next(); {
		keys = append(keys, it.Key().String())
	}
	// Canonical order of text keys: shorter first, then bytewise.
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	dst = canon.AppendMap(dst, uint64(len(keys)))
	e := reflect.New(p.elem.typ)
	for _, k := range keys {
		dst = canon.AppendText(dst, k)
		e.Elem().Set(m.MapIndex(reflect.ValueOf(k)))
		dst = p.elem.encode(dst, e.UnsafePointer())
	}
	return dst
}

func loadInt(ptr unsafe.Pointer, size uintptr) int64 {
	switch size {
	case 1:
		return int64(*(*int8)(ptr))
	case 2:
		return int64(*(*int16)(ptr))
	case 4:
		return int64(*(*int32)(ptr))
	}
	return *(*int64)(ptr)
}

func loadUint(ptr unsafe.Pointer, size uintptr) uint64 {
	switch size {
	case 1:
		return uint64(*(*uint8)(ptr))
	case 2:
		return uint64(*(*uint16)(ptr))
	case 4:
		return uint64(*(*uint32)(ptr))
	}
	return *(*uint64)(ptr)
}
