package sdk

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/aos-kernel/aos/modules"
	"github.com/fxamacker/cbor/v2"
)

// Types the plans compile, covering every kind and option they support.
type (
	cInner struct {
		A  int8   `cbor:"a"`
		B  uint16 `json:"b"`
		S  string
		Bs []byte `cbor:"bs,omitempty"`
	}
	cName string
	cAll  struct {
		Bool  bool    `cbor:"bool"`
		I     int     `cbor:"i"`
		I8    int8    `cbor:"i8"`
		I16   int16   `cbor:"i16"`
		I32   int32   `cbor:"i32"`
		I64   int64   `cbor:"i64"`
		U     uint    `cbor:"u"`
		U8    uint8   `cbor:"u8"`
		U16   uint16  `cbor:"u16"`
		U32   uint32  `cbor:"u32"`
		U64   uint64  `cbor:"u64"`
		Str   string  `cbor:"s"`
		Bytes []byte  `cbor:"b"`
		Name  cName   `cbor:"n,omitempty"`
		In    cInner  `cbor:"in"`
		P     *cInner `cbor:"p,omitempty"`
		PI    *int64  `cbor:"pi"`
		PP    **bool
		L     []cInner            `cbor:"l"`
		LS    []string            `cbor:"ls,omitempty"`
		LL    [][]byte            `json:"ll"`
		M     map[string]int32    `cbor:"m"`
		MP    map[string]*cInner  `cbor:"mp,omitempty"`
		MS    map[string][]uint64 `cbor:"ms,omitempty"`
		Skip  int                 `cbor:"-"`
		JSkip int                 `json:"-"`
		Both  int                 `cbor:"both" json:"json_name"`
		Empty int                 `cbor:",omitempty"`
		// A name longer than 23 bytes takes a two-byte head.
		LongFieldNameOverTwentyThree string
		OB                           bool   `cbor:"ob,omitempty"`
		OI                           int16  `cbor:"oi,omitempty"`
		OU                           uint32 `cbor:"ou,omitempty"`
		OS                           string `cbor:"os,omitempty"`
		unexported                   int
	}
	// cTree is recursive.
	cTree struct {
		V    int      `cbor:"v"`
		Kids []*cTree `cbor:"kids,omitempty"`
		Next *cTree   `cbor:"next"`
	}
	cCounter struct {
		Count int64 `cbor:"count"`
	}
	cEvent struct {
		Key string `cbor:"key"`
		By  int64  `cbor:"by"`
	}
)

// codecTypes are the types the differential tests run on.
var codecTypes = []reflect.Type{
	reflect.TypeFor[cAll](),
	reflect.TypeFor[cInner](),
	reflect.TypeFor[cTree](),
	reflect.TypeFor[cCounter](),
	reflect.TypeFor[cEvent](),
	reflect.TypeFor[*cEvent](),
	reflect.TypeFor[[]int32](),
	reflect.TypeFor[map[string]string](),
	reflect.TypeFor[string](),
	reflect.TypeFor[uint8](),
}

func mustPlan(t testing.TB, typ reflect.Type) *plan {
	t.Helper()
	p, err := compilePlan(typ)
	if err != nil {
		t.Fatalf("%s does not compile: %v", typ, err)
	}
	return p
}

// checkDecode decodes data into fresh values of typ with the plan and the
// library: a plan that accepts must agree with the library exactly. It
// returns whether the plan accepted.
func checkDecode(t testing.TB, p *plan, typ reflect.Type, data []byte) bool {
	t.Helper()
	fast := reflect.New(typ)
	ok := p.decode(data, fast.UnsafePointer())
	lib := reflect.New(typ)
	err := decMode.Unmarshal(data, lib.Interface())
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("%s from %x: the plan accepts, the library says %v", typ, data, err)
	}
	if !reflect.DeepEqual(fast.Elem().Interface(), lib.Elem().Interface()) {
		t.Fatalf("%s from %x:\nplan    %#v\nlibrary %#v", typ, data, fast.Elem().Interface(), lib.Elem().Interface())
	}
	return true
}

// checkEncode encodes v (a pointer) with the plan and the library, which
// must write the same bytes; the plan must decode them as the library does.
func checkEncode(t testing.TB, p *plan, v reflect.Value) (decoded bool) {
	t.Helper()
	want, err := encMode.Marshal(v.Interface())
	if err != nil {
		t.Fatalf("library encodes %#v: %v", v.Elem().Interface(), err)
	}
	got := p.encode(nil, v.UnsafePointer())
	if !bytes.Equal(got, want) {
		t.Fatalf("%s %#v:\nplan    %x\nlibrary %x", v.Type().Elem(), v.Elem().Interface(), got, want)
	}
	// The library writes strings that are not UTF-8 and refuses to read
	// them back; what it reads back the plan must read too.
	if decMode.Wellformed(want) != nil {
		t.Fatalf("library's encoding %x is not well-formed", want)
	}
	if decMode.Unmarshal(want, reflect.New(v.Type().Elem()).Interface()) != nil {
		return false
	}
	if !checkDecode(t, p, v.Type().Elem(), want) {
		t.Fatalf("%s: the plan refuses the library's own encoding %x", v.Type().Elem(), want)
	}
	return true
}

func TestCodecCompiles(t *testing.T) {
	for _, typ := range codecTypes {
		mustPlan(t, typ)
	}
	p := mustPlan(t, reflect.TypeFor[cAll]())
	var names []string
	for _, f := range p.fields {
		names = append(names, f.name)
	}
	// Named by the library's rules, in canonical order.
	want := "b i l m n p s u PP i8 in ll ls mp ms ob oi os ou pi u8 i16 i32 i64 u16 u32 u64 bool both Empty LongFieldNameOverTwentyThree"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("fields %q, want %q", got, want)
	}
}

// Types the plans leave to the library, each with why.
type (
	uFloat     struct{ F float64 }
	uAny       struct{ A any }
	uArray     struct{ A [4]byte }
	uMarshaler struct{ M cborSelf }
	cborSelf   struct{ X int }
	uText      struct{ T textSelf }
	textSelf   int
	uTime      struct{ T time.Time }
	uBig       struct{ B big.Int }
	uRaw       struct{ R RawValue }
	uVariant   struct{ V Variant }
	uEmbedded  struct{ cInner }
	uToArray   struct {
		_ struct{} `cbor:",toarray"`
		A int
	}
	uKeyAsInt struct {
		A int `cbor:"1,keyasint"`
	}
	uOmitStruct struct {
		I cInner `cbor:"i,omitempty"`
	}
	uDup struct {
		A int `cbor:"x"`
		B int `json:"x"`
	}
	uNamedBytes struct{ B []myByte }
	myByte      uint8
	uFloatDeep  struct{ L []map[string]*float32 }
	uIntKeys    struct{ M map[int]string }
)

func (cborSelf) MarshalCBOR() ([]byte, error)  { return []byte{0x01}, nil }
func (*cborSelf) UnmarshalCBOR([]byte) error   { return nil }
func (textSelf) MarshalText() ([]byte, error)  { return []byte("t"), nil }
func (*textSelf) UnmarshalText(b []byte) error { return nil }

// A method that is not an encoding does not stop a type compiling.
func (c cCounter) String() string { return fmt.Sprint("count ", c.Count) }

func TestCodecUnsupportedGoesThroughLibrary(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[uFloat](), reflect.TypeFor[uAny](), reflect.TypeFor[uArray](),
		reflect.TypeFor[uMarshaler](), reflect.TypeFor[uText](), reflect.TypeFor[uTime](),
		reflect.TypeFor[uBig](), reflect.TypeFor[uRaw](), reflect.TypeFor[uVariant](),
		reflect.TypeFor[Variant](), reflect.TypeFor[uEmbedded](), reflect.TypeFor[uToArray](),
		reflect.TypeFor[uKeyAsInt](), reflect.TypeFor[uOmitStruct](), reflect.TypeFor[uDup](),
		reflect.TypeFor[uNamedBytes](), reflect.TypeFor[uFloatDeep](), reflect.TypeFor[uIntKeys](),
		reflect.TypeFor[cbor.Tag](), reflect.TypeFor[cbor.RawTag](), reflect.TypeFor[cbor.SimpleValue](),
		reflect.TypeFor[cbor.ByteString](), reflect.TypeFor[cbor.RawMessage](),
	} {
		if p, err := compilePlan(typ); err == nil || p != nil {
			t.Errorf("%s compiles to a plan %v (%v)", typ, p, err)
		}
	}

	// And a workflow on them still works, through the library.
	m := NewModule("unsupported")
	Workflow(m, "float", func(c *Ctx, st *uFloat, ev uFloat) (*uFloat, error) {
		return &uFloat{F: ev.F * 2}, nil
	})
	Workflow(m, "marshaler", func(c *Ctx, st *uMarshaler, ev uAny) (*uMarshaler, error) {
		if ev.A != "x" {
			return nil, fmt.Errorf("event %v", ev.A)
		}
		return &uMarshaler{}, nil
	})
	b := m.Builtin("u").Entrypoints
	out, err := b["float"](stepIn{Event: must(encMode.Marshal(uFloat{F: 1.5}))}.in())
	if err != nil || !bytes.Equal(out.State, must(encMode.Marshal(uFloat{F: 3}))) {
		t.Fatalf("float step: %x, %v", out.State, err)
	}
	out, err = b["marshaler"](stepIn{Event: must(encMode.Marshal(uAny{A: "x"}))}.in())
	if err != nil || !bytes.Equal(out.State, []byte{0xa1, 0x61, 'M', 0x01}) {
		t.Fatalf("marshaler step: %x, %v", out.State, err)
	}
}

// stepIn is a step's input: state and event.
type stepIn struct{ State, Event []byte }

func (s stepIn) in() *modules.Input {
	return &modules.Input{Version: 1, State: s.State, Event: modules.EventIn{Schema: "s", Value: s.Event}}
}

// hexb reads hex with spaces; "" is nil.
func hexb(t testing.TB, s string) []byte {
	t.Helper()
	if s == "" {
		return nil
	}
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestCodecEncodeMatchesLibrary(t *testing.T) {
	pi, tr := int64(-7), true
	ptr := &tr
	p := mustPlan(t, reflect.TypeFor[cAll]())
	for i, v := range []cAll{
		{},
		{Bool: true, I: -1, I8: math.MinInt8, I16: math.MaxInt16, I32: math.MinInt32, I64: math.MinInt64,
			U: math.MaxUint64, U8: 255, U16: 65535, U32: math.MaxUint32, U64: 1 << 63,
			Str: "héllo", Bytes: []byte{}, Name: "n", In: cInner{A: 1, B: 2, S: "s", Bs: []byte{1}},
			P: &cInner{}, PI: &pi, PP: &ptr, L: []cInner{{}, {A: -3}}, LS: []string{}, LL: [][]byte{nil, {}, {9}},
			M: map[string]int32{"b": 1, "a": 2, "aa": 3, "": 4}, MP: map[string]*cInner{"x": nil, "y": {S: "y"}},
			MS: map[string][]uint64{"k": nil}, Skip: 5, JSkip: 6, Both: 7, Empty: 8,
			LongFieldNameOverTwentyThree: strings.Repeat("x", 300), OB: true, OI: -1, OU: 1, OS: "o", unexported: 9},
		{Str: "\xff\xfe not UTF-8", M: map[string]int32{}, L: []cInner{}, PP: new(*bool)},
		{I: 23, I8: 24, I16: 255, I32: 256, I64: 65535, U16: 65535, U32: 65536, U64: 1<<32 - 1, U: 1 << 32},
		{I: -24, I8: -25, I16: -256, I32: -257, I64: -65536, U: 24},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkEncode(t, p, reflect.ValueOf(&v)) })
	}
	tree := &cTree{V: 1, Kids: []*cTree{{V: 2}, nil, {V: -3, Next: &cTree{}}}}
	checkEncode(t, mustPlan(t, reflect.TypeFor[cTree]()), reflect.ValueOf(tree))
}

// FuzzCodecEncodeMatchesLibrary: random values of every test type encode
// to the library's bytes and decode back as the library decodes them.
func FuzzCodecEncodeMatchesLibrary(f *testing.F) {
	for seed := range int64(20) {
		f.Add(seed)
	}
	plans := map[reflect.Type]*plan{}
	for _, typ := range codecTypes {
		plans[typ] = mustPlan(f, typ)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		rng := rand.New(rand.NewSource(seed))
		bad := seed%4 == 0
		for _, typ := range codecTypes {
			v := reflect.New(typ)
			fill(rng, bad, v.Elem(), 0)
			if !checkEncode(t, plans[typ], v) && !bad {
				t.Fatalf("%s %#v: the library does not read back its encoding", typ, v.Elem().Interface())
			}
		}
	})
}

// fill sets v to a random value, with nil and empty containers, extreme
// integers and odd strings more often than chance would give them.
//
// With bad, strings may be invalid UTF-8, which the library writes and
// does not read back.
func fill(rng *rand.Rand, bad bool, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rng.Intn(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		switch rng.Intn(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(-1 << (bits - 1))
		case 2:
			v.SetInt(1<<(bits-1) - 1)
		default:
			v.SetInt(rng.Int63n(1<<(rng.Intn(bits-2)+1)) - 1<<(bits-3))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := v.Type().Bits()
		switch rng.Intn(3) {
		case 0:
			v.SetUint(0)
		case 1:
			v.SetUint(math.MaxUint64 >> (64 - bits))
		default:
			v.SetUint(rng.Uint64() >> (64 - rng.Intn(bits) - 1))
		}
	case reflect.String:
		s := []string{"", "a", "é", strings.Repeat("z", 24), "key", "count", "\xff"}
		n := len(s) - 1
		if bad {
			n++
		}
		v.SetString(s[rng.Intn(n)] + s[rng.Intn(n)])
	case reflect.Slice:
		n := rng.Intn(4) - 1
		if n < 0 || depth > 4 {
			return // nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, bad, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		n := rng.Intn(4) - 1
		if n < 0 || depth > 4 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range n {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(rng, bad, k, depth+1)
			fill(rng, bad, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if rng.Intn(3) == 0 || depth > 4 {
			return
		}
		e := reflect.New(v.Type().Elem())
		fill(rng, bad, e.Elem(), depth+1)
		v.Set(e)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, bad, v.Field(i), depth+1)
			}
		}
	}
}

// The plan decodes exactly what the library decodes, or gives up: each
// case names whether the plan takes it (true) or leaves it to the library.
func TestCodecDecodeMatchesLibrary(t *testing.T) {
	h := func(s string) []byte { return hexb(t, s) }
	counter, event := reflect.TypeFor[cCounter](), reflect.TypeFor[cEvent]()
	all, inner := reflect.TypeFor[cAll](), reflect.TypeFor[cInner]()
	for _, c := range []struct {
		name string
		typ  reflect.Type
		hex  string
		fast bool
	}{
		{"counter", counter, "a1 65636f756e74 1829", true},
		{"empty map", counter, "a0", true},
		{"null", counter, "f6", true},
		{"null field", counter, "a1 65636f756e74 f6", true},
		{"negative", counter, "a1 65636f756e74 3863", true},
		{"min int64", counter, "a1 65636f756e74 3b7fffffffffffffff", true},
		{"negative overflow", counter, "a1 65636f756e74 3b8000000000000000", false},
		{"uint overflow", counter, "a1 65636f756e74 1b8000000000000000", false},
		{"non-shortest head", counter, "a1 65636f756e74 1800", true},
		{"float into int", counter, "a1 65636f756e74 f93c00", false},
		{"text into int", counter, "a1 65636f756e74 6131", false},
		{"undefined", counter, "a1 65636f756e74 f7", false},
		{"tag", counter, "a1 65636f756e74 c11a", false},
		{"unknown key skipped", counter, "a2 61 78 82 01 a1 61 61 f4 65636f756e74 01", true},
		{"unknown float skipped", counter, "a2 61 78 fb3ff0000000000000 65636f756e74 01", true},
		{"unknown key with a tag", counter, "a2 61 78 c1 01 65636f756e74 01", false},
		{"unknown key bad UTF-8", counter, "a2 61 78 61 ff 65636f756e74 01", false},
		{"duplicate field", counter, "a2 65636f756e74 01 65636f756e74 02", false},
		{"duplicate unknown key", counter, "a3 61 78 01 61 78 01 65636f756e74 02", false},
		{"integer key", counter, "a1 00 61 78", false},
		{"byte string key", counter, "a1 45 636f756e74 01", false},
		{"key not UTF-8", counter, "a1 61 ff 01", false},
		{"trailing bytes", counter, "a1 65636f756e74 01 00", false},
		{"truncated", counter, "a1 65636f756e74", false},
		{"count beyond input", counter, "a5 65636f756e74 01", false},
		{"indefinite map", counter, "bf 65636f756e74 01 ff", false},
		{"array for struct", counter, "81 01", false},
		{"event", event, "a2 63 6b6579 61 61 62 6279 01", true},
		{"bytes into string", event, "a1 63 6b6579 41 61", false},
		{"string bad UTF-8", event, "a1 63 6b6579 61 ff", false},
		{"empty string", event, "a1 63 6b6579 60", true},
		{"int8 range", inner, "a1 61 61 387f", true},
		{"int8 overflow", inner, "a1 61 61 3880", false},
		{"uint16 overflow", inner, "a1 61 62 1a00010000", false},
		{"negative into uint", inner, "a1 61 62 20", false},
		{"empty bytes", inner, "a1 62 6273 40", true},
		{"null bytes", inner, "a1 62 6273 f6", true},
		{"text into bytes", inner, "a1 62 6273 60", false},
		{"empty array", all, "a1 61 6c 80", true},
		{"array of null", all, "a1 61 6c 81 f6", true},
		{"empty map into map", all, "a1 61 6d a0", true},
		{"map", all, "a2 61 6d a2 61 61 01 61 62 20 62 6d70 a1 61 78 f6", true},
		{"duplicate map key", all, "a1 61 6d a2 61 61 01 61 61 02", false},
		{"bool", all, "a1 64 626f6f6c f5", true},
		{"int into bool", all, "a1 64 626f6f6c 01", false},
		{"pointer", all, "a2 62 7069 20 61 70 a0", true},
		{"pointer to pointer", all, "a1 62 5050 f5", true},
		{"null pointer", all, "a1 62 7069 f6", true},
		{"skipped field is unknown", all, "a1 64 536b6970 01", true},
		{"go name of a tagged field", all, "a1 64 426f7468 01", true},
		{"unknown key cbor-named twice", all, "a2 64 536b6970 01 64 536b6970 01", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkDecode(t, mustPlan(t, c.typ), c.typ, h(c.hex)); got != c.fast {
				t.Fatalf("plan takes %s: %v, want %v", c.hex, got, c.fast)
			}
		})
	}
}

// The plan gives up where the library's nesting limit is, never past it.
func TestCodecDecodeDepth(t *testing.T) {
	typ := reflect.TypeFor[cTree]()
	p := mustPlan(t, typ)
	nested := func(levels int, leaf []byte) []byte {
		// levels maps, each {"next": ...}, the innermost holding leaf.
		var b []byte
		for range levels {
			b = append(b, 0xa1, 0x64, 'n', 'e', 'x', 't')
		}
		return append(b, leaf...)
	}
	for _, c := range []struct {
		levels int
		leaf   []byte
	}{{63, []byte{0xa0}}, {64, []byte{0xa0}}, {63, []byte{0xa1, 0x61, 'x', 0x80}}, {62, []byte{0xa1, 0x61, 'x', 0x81, 0x80}}, {64, []byte{0x01}}} {
		data := nested(c.levels, c.leaf)
		checkDecode(t, p, typ, data)
	}
	if !checkDecode(t, p, typ, nested(62, []byte{0xa0})) {
		t.Fatal("the plan gives up within the library's limit")
	}
}

// FuzzCodecDecodeMatchesLibrary: whatever the bytes, a plan that decodes
// them decodes them as the library does.
func FuzzCodecDecodeMatchesLibrary(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	bad := false
	for _, typ := range codecTypes {
		for range 5 {
			v := reflect.New(typ)
			fill(rng, bad, v.Elem(), 0)
			f.Add(must(encMode.Marshal(v.Interface())))
		}
	}
	f.Add([]byte{0xa2, 0x61, 'x', 0x01, 0x61, 'x', 0x01})
	f.Add([]byte{0xa1, 0x61, 'l', 0x81, 0xa1, 0x61, 'a', 0x38, 0x7f})
	plans := map[reflect.Type]*plan{}
	for _, typ := range codecTypes {
		plans[typ] = mustPlan(f, typ)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range codecTypes {
			checkDecode(t, plans[typ], typ, data)
		}
	})
}

// The workflow's step decodes with the plan, and on what the plan does not
// take fails with the library's fault text.
func TestCodecWorkflowFaultsAreTheLibrarys(t *testing.T) {
	m := NewModule("codec")
	Workflow(m, "step", func(c *Ctx, st *cCounter, ev cEvent) (*cCounter, error) {
		n := int64(0)
		if st != nil {
			n = st.Count
		}
		return &cCounter{Count: n + ev.By}, nil
	})
	step := m.Builtin("c").Entrypoints["step"]
	for _, c := range []struct{ state, event, want string }{
		{"a1 65636f756e74 01", "a2 63 6b6579 61 61 62 6279 02", "a1 65636f756e74 03"},
		{"", "a1 62 6279 20", "a1 65636f756e74 20"},
		{"f6", "a0", "a1 65636f756e74 00"},
		{"a1 65636f756e74 fb3ff0000000000000", "a0", "fault"},
		{"a1 65636f756e74 01", "a2 62 6279 01 62 6279 01", "fault"},
		{"a1 65636f756e74 01", "a1 63 6b6579 61 ff", "fault"},
		{"a1 65636f756e74 01", "a1 62 6279 3b8000000000000000", "fault"},
		{"a1 65636f756e74 01", "a1 62 6279 01 00", "fault"},
	} {
		in := stepIn{State: hexb(t, c.state), Event: hexb(t, c.event)}
		out, err := step(in.in())
		if c.want != "fault" {
			if err != nil || !bytes.Equal(out.State, hexb(t, c.want)) {
				t.Fatalf("%s, %s: %x, %v; want %s", c.state, c.event, out, err, c.want)
			}
			continue
		}
		// The library's own text for the same input.
		var want string
		var st cCounter
		var ev cEvent
		if e := decMode.Unmarshal(in.State, &st); in.State != nil && e != nil {
			want = fmt.Sprintf("state does not decode into sdk.cCounter: %v", e)
		} else if e := decMode.Unmarshal(in.Event, &ev); e != nil {
			want = fmt.Sprintf("event does not decode into sdk.cEvent: %v", e)
		}
		if err == nil || err.Error() != want || want == "" {
			t.Fatalf("%s, %s: fault %v, want %q", c.state, c.event, err, want)
		}
	}
}

// A plan that gives up part way hands the step the library's value: here
// it has decoded a map when it meets undefined, which the library takes
// (as null) and the plan leaves to it.
func TestCodecWorkflowGivesUpPartWay(t *testing.T) {
	m := NewModule("codec")
	Workflow(m, "step", func(c *Ctx, st *cAll, ev cCounter) (*cAll, error) { return st, nil })
	state := hexb(t, "a2 61 6d a1 61 61 01 62 7538 f7")
	var lib cAll
	if err := decMode.Unmarshal(state, &lib); err != nil {
		t.Fatal(err)
	}
	if p := mustPlan(t, reflect.TypeFor[cAll]()); p.decode(state, unsafe.Pointer(new(cAll))) {
		t.Fatal("the plan takes undefined; the test needs an input it gives up on")
	}
	out, err := m.Builtin("c").Entrypoints["step"](stepIn{State: state, Event: []byte{0xa0}}.in())
	if err != nil {
		t.Fatal(err)
	}
	if want := must(encMode.Marshal(&lib)); !bytes.Equal(out.State, want) {
		t.Fatalf("state %x, want the library's %x", out.State, want)
	}
}

// The plans' point: a step's decode and encode allocate what the values
// need, no more. The counter's state and event take one allocation each
// plus the event's key string and the encoded state.
func TestCodecDecodeAllocations(t *testing.T) {
	p := mustPlan(t, reflect.TypeFor[cEvent]())
	data := []byte{0xa2, 0x63, 'k', 'e', 'y', 0x61, 'a', 0x62, 'b', 'y', 0x01}
	var ev cEvent
	n := testing.AllocsPerRun(100, func() {
		ev = cEvent{}
		if !p.decode(data, unsafe.Pointer(&ev)) {
			t.Fatal("refused")
		}
	})
	if n > 1 {
		t.Fatalf("decode allocates %v times, want at most 1 (the key string)", n)
	}
}
