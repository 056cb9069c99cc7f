package canon_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/fxamacker/cbor/v2"
)

var encMode = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// lenient reads what any well-formed CBOR may hold, so the tests can ask
// the library about non-shortest heads and deep nesting too.
var lenient = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		MaxNestedLevels:  65535,
		MaxArrayElements: math.MaxInt32,
		MaxMapPairs:      math.MaxInt32,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		DupMapKey:        cbor.DupMapKeyQuiet,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := encMode.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var edges = []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, 1<<64 - 1}

func TestAppendersMatchLibrary(t *testing.T) {
	for _, n := range edges {
		if got, want := canon.AppendUint(nil, n), marshal(t, n); !bytes.Equal(got, want) {
			t.Errorf("AppendUint(%d) = %x, want %x", n, got, want)
		}
		if n < 1<<63 {
			if got, want := canon.AppendHead(nil, canon.MajorNeg, n), marshal(t, -1-int64(n)); !bytes.Equal(got, want) {
				t.Errorf("AppendHead(neg, %d) = %x, want %x", n, got, want)
			}
		}
		if got := canon.HeadLen(n); got != len(canon.AppendUint(nil, n)) {
			t.Errorf("HeadLen(%d) = %d, want %d", n, got, len(canon.AppendUint(nil, n)))
		}
	}
	for _, n := range []int{0, 1, 23, 24, 255, 256, 65535, 65536} {
		s := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
		if got, want := canon.AppendText(nil, s), marshal(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendText(len %d) differs from the library", len(s))
		}
		p := bytes.Repeat([]byte{7}, n)
		if got, want := canon.AppendBytes(nil, p), marshal(t, p); !bytes.Equal(got, want) {
			t.Errorf("AppendBytes(len %d) differs from the library", n)
		}
		if got, want := canon.AppendBytesOrNull(nil, p), marshal(t, p); !bytes.Equal(got, want) {
			t.Errorf("AppendBytesOrNull(len %d) differs from the library", n)
		}
		want := marshal(t, make([]uint16, n)) // zeros: one byte each after the head
		if got := canon.AppendArray(nil, uint64(n)); !bytes.HasPrefix(want, got) || len(want)-len(got) != n {
			t.Errorf("AppendArray(%d) = %x, not the head of the library's array", n, got)
		}
	}
	for n := range 30 {
		m := make(map[uint16]uint16, n)
		for k := range n {
			m[uint16(k)] = 0
		}
		if got, want := canon.AppendMap(nil, uint64(n)), marshal(t, m); !bytes.HasPrefix(want, got) {
			t.Errorf("AppendMap(%d) = %x, not the head of %x", n, got, want)
		}
	}
	if got, want := canon.AppendBytes(nil, nil), marshal(t, []byte{}); !bytes.Equal(got, want) {
		t.Errorf("AppendBytes(nil) = %x, want %x", got, want)
	}
	if got, want := canon.AppendBytesOrNull(nil, nil), marshal(t, []byte(nil)); !bytes.Equal(got, want) {
		t.Errorf("AppendBytesOrNull(nil) = %x, want %x", got, want)
	}
	for _, v := range []bool{false, true} {
		if got, want := canon.AppendBool(nil, v), marshal(t, v); !bytes.Equal(got, want) {
			t.Errorf("AppendBool(%v) = %x, want %x", v, got, want)
		}
	}
	if got, want := canon.AppendNull(nil), marshal(t, nil); !bytes.Equal(got, want) {
		t.Errorf("AppendNull = %x, want %x", got, want)
	}
	if got := canon.AppendText([]byte{1, 2}, "a"); !bytes.Equal(got, []byte{1, 2, 0x61, 'a'}) {
		t.Errorf("AppendText does not append: %x", got)
	}
}

func TestHeadRoundTrip(t *testing.T) {
	for major := range byte(8) {
		for _, n := range edges {
			b := canon.AppendHead([]byte{0xff}, major, n)
			m, arg, next, ok := canon.Head(b, 1)
			if !ok || m != major || arg != n || next != len(b) || next-1 != canon.HeadLen(n) {
				t.Errorf("Head(AppendHead(%d, %d)) = %d %d %d %v", major, n, m, arg, next, ok)
			}
			for cut := 1; cut < len(b); cut++ {
				if _, _, _, ok := canon.Head(b[:cut], 1); ok {
					t.Errorf("Head accepted a head of %d cut to %d bytes", n, cut-1)
				} else if canon.Why(b[:cut], 1) != canon.Truncated {
					t.Errorf("Why(cut head) = %v", canon.Why(b[:cut], 1))
				}
			}
		}
	}
	for _, c := range []struct {
		b    []byte
		want canon.Problem
	}{{nil, canon.Truncated}, {[]byte{0x9f}, canon.Indefinite}, {[]byte{0x1c}, canon.Reserved}, {[]byte{0x5e}, canon.Reserved}, {[]byte{0x19, 1}, canon.Truncated}} {
		if _, _, _, ok := canon.Head(c.b, 0); ok {
			t.Errorf("Head(%x) accepted", c.b)
		}
		if got := canon.Why(c.b, 0); got != c.want {
			t.Errorf("Why(%x) = %v, want %v", c.b, got, c.want)
		}
	}
	if _, _, _, ok := canon.Head([]byte{0}, -1); ok {
		t.Error("Head accepted a negative offset")
	}
}

func TestSkip(t *testing.T) {
	nested := func(n int) []byte { return append(bytes.Repeat([]byte{0x81}, n), 0) }
	for _, c := range []struct {
		name  string
		b     []byte
		valid bool
		next  int
		want  canon.Problem
	}{
		{"uint", []byte{0x18, 30, 9}, true, 2, canon.OK},
		{"map", []byte{0xa1, 0x61, 'a', 0x82, 0xf5, 0xf6, 9}, true, 6, canon.OK},
		{"float", []byte{0xfb, 0, 0, 0, 0, 0, 0, 0, 0}, true, 9, canon.OK},
		{"deepest", nested(canon.MaxDepth), true, canon.MaxDepth + 1, canon.OK},
		{"too deep", nested(canon.MaxDepth + 1), true, 0, canon.TooDeep},
		{"tag", []byte{0x81, 0xc1, 0}, true, 0, canon.Tag},
		{"truncated text", []byte{0x63, 'a'}, true, 0, canon.Truncated},
		{"truncated array", []byte{0x83, 0, 0}, true, 0, canon.Truncated},
		{"indefinite", []byte{0x81, 0x9f}, true, 0, canon.Indefinite},
		{"reserved", []byte{0xa1, 0x1d}, true, 0, canon.Reserved},
		{"bad utf8", []byte{0x62, 0xc3, 0x28}, true, 0, canon.BadUTF8},
		{"bad utf8 unchecked", []byte{0x62, 0xc3, 0x28}, false, 3, canon.OK},
		{"bad simple", []byte{0xf8, 0x10}, true, 0, canon.BadSimple},
		{"bad simple unchecked", []byte{0xf8, 0x10}, false, 2, canon.OK},
		{"simple 32", []byte{0xf8, 0x20}, true, 2, canon.OK},
		{"huge array", []byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}, false, 0, canon.Truncated},
	} {
		next, p := canon.Skip(c.b, 0, c.valid)
		if next != c.next || p != c.want {
			t.Errorf("%s: Skip = %d, %v; want %d, %v", c.name, next, p, c.next, c.want)
		}
	}
}

// SkipAt counts depth from the top: an item already d levels down may
// nest MaxDepth-d more.
func TestSkipAt(t *testing.T) {
	nested := func(n int) []byte { return append(bytes.Repeat([]byte{0x81}, n), 0) }
	for _, c := range []struct {
		name        string
		b           []byte
		depth, next int
		want        canon.Problem
	}{
		{"top", nested(canon.MaxDepth), 0, canon.MaxDepth + 1, canon.OK},
		{"deepest below 10", nested(canon.MaxDepth - 10), 10, canon.MaxDepth - 9, canon.OK},
		{"too deep below 10", nested(canon.MaxDepth - 9), 10, 0, canon.TooDeep},
		{"a scalar at the limit", []byte{0}, canon.MaxDepth, 1, canon.OK},
		{"past the limit", []byte{0}, canon.MaxDepth + 1, 0, canon.TooDeep},
	} {
		next, p := canon.SkipAt(c.b, 0, c.depth, true)
		if next != c.next || p != c.want {
			t.Errorf("%s: SkipAt = %d, %v; want %d, %v", c.name, next, p, c.next, c.want)
		}
	}
}

func TestHeadDoesNotAllocate(t *testing.T) {
	b := canon.AppendHead(nil, canon.MajorMap, 70000)
	var buf [16]byte
	if n := testing.AllocsPerRun(100, func() {
		_, _, _, _ = canon.Head(b, 0)
		_, _ = canon.Skip([]byte{0x82, 0x61, 'a', 0xf6}, 0, true)
		_ = canon.AppendText(buf[:0], "key")
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// FuzzHeadAndSkip holds the reader to the library: every head Head reads
// is the one the library reads, every item Skip steps over is one
// well-formed item to the library, and every item the library reads Skip
// steps over too (unless it nests deeper than Skip allows).
func FuzzHeadAndSkip(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range edges {
		f.Add(canon.AppendHead(nil, byte(r.IntN(8)), n))
	}
	for _, s := range [][]byte{{0xa1, 0x61, 'a', 0x82, 0xf5, 0xf6}, {0x62, 0xc3, 0x28}, {0xf8, 0x10}, {0x9f, 0xff}, {0xc1, 0}, {0x18, 3}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		major, arg, next, ok := canon.Head(data, 0)
		if ok {
			checkHead(t, data, major, arg, next)
		} else if p := canon.Why(data, 0); p != canon.Indefinite {
			var raw cbor.RawMessage
			if _, err := lenient.UnmarshalFirst(data, &raw); err == nil {
				t.Fatalf("Head refused %x (%v), the library reads it", data, p)
			}
		}

		var raw cbor.RawMessage
		_, libErr := lenient.UnmarshalFirst(data, &raw)
		end, p := canon.Skip(data, 0, true)
		if p == canon.OK && (libErr != nil || end != len(raw)) {
			t.Fatalf("Skip(valid) read %d bytes of %x; the library: %d, %v", end, data, len(raw), libErr)
		}
		if libErr == nil {
			end, p := canon.Skip(data, 0, false)
			if p != canon.TooDeep && (p != canon.OK || end != len(raw)) {
				t.Fatalf("Skip read %x as %d, %v; the library reads %d bytes", data, end, p, len(raw))
			}
		}
	})
}

// checkHead compares a head Head read with what the library reads.
func checkHead(t *testing.T, data []byte, major byte, arg uint64, next int) {
	t.Helper()
	if major != data[0]>>5 || next > len(data) || next < 1 || next > 9 {
		t.Fatalf("Head(%x) = %d %d %d", data, major, arg, next)
	}
	switch major {
	case canon.MajorUint:
		var v uint64
		if err := lenient.Unmarshal(data[:next], &v); err != nil || v != arg {
			t.Fatalf("Head(%x) = %d; the library: %d, %v", data, arg, v, err)
		}
	case canon.MajorNeg:
		if arg < 1<<63 {
			var v int64
			if err := lenient.Unmarshal(data[:next], &v); err != nil || v != -1-int64(arg) {
				t.Fatalf("Head(%x) = -1-%d; the library: %d, %v", data, arg, v, err)
			}
		}
	case canon.MajorBytes, canon.MajorArray:
		if arg <= 1<<16 { // a byte string of zeros, or an array of zeros
			item := append(append([]byte(nil), data[:next]...), make([]byte, arg)...)
			var v any
			if err := lenient.Unmarshal(item, &v); err != nil || uint64(reflect.ValueOf(v).Len()) != arg {
				t.Fatalf("Head(%x) = length %d; the library: %v, %v", data, arg, v, err)
			}
		}
	}
}

func TestTypeName(t *testing.T) {
	want := []string{"an unsigned integer", "a negative integer", "a byte string", "a text string",
		"an array", "a map", "a tag", "a simple value or float"}
	for major, w := range want {
		if got := canon.TypeName(byte(major)); got != w {
			t.Errorf("TypeName(%d) = %q, want %q", major, got, w)
		}
	}
}
