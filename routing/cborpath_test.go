package routing

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// referenceKey is key extraction as it was before lookupCBOR: decode the
// whole event, walk the maps, re-encode the field.
func referenceKey(value []byte, path []string) ([]byte, error) {
	v, err := schemas.Decode(value)
	if err != nil {
		return nil, err
	}
	kv, err := lookup(v, path)
	if err != nil {
		return nil, err
	}
	return schemas.Marshal(kv)
}

func lookup(v any, path []string) (any, error) {
	cur := v
	for i, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("/%s is not an object", strings.Join(path[:i], "/"))
		}
		next, ok := m[p]
		if !ok {
			return nil, fmt.Errorf("no field /%s", strings.Join(path[:i+1], "/"))
		}
		cur = next
	}
	if cur == nil {
		return nil, fmt.Errorf("/%s is null", strings.Join(path, "/"))
	}
	return cur, nil
}

// TestLookupCBORMatchesDecode: on random canonical values and random paths
// (present, missing, through non-objects, ending at null), lookupCBOR gives
// the bytes or the error message the decode-and-re-encode reference gives.
func TestLookupCBORMatchesDecode(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	names := []string{"a", "id", "$value", "longer_field_name_here", "x"}
	var gen func(depth int) any
	gen = func(depth int) any {
		switch n := r.IntN(10); {
		case depth == 0 || n < 3 && depth < 5:
			m := map[string]any{}
			for k := r.IntN(6) + 2*btoi(depth == 0); k > 0; k-- {
				m[names[r.IntN(len(names))]] = gen(depth + 1)
			}
			return m
		case n < 4 && depth < 5:
			a := make([]any, r.IntN(4))
			for i := range a {
				a[i] = gen(depth + 1)
			}
			return a
		case n < 5:
			return int64(r.Uint64()) >> r.IntN(64)
		case n < 6:
			return strings.Repeat("s", r.IntN(300))
		case n < 7:
			return bytes.Repeat([]byte{7}, r.IntN(30))
		case n < 8:
			return nil
		case n < 9:
			return r.IntN(2) == 0
		}
		return r.Float64() + 0.5
	}
	checked := map[bool]int{}
	for i := 0; i < 20000; i++ {
		v := gen(0)
		data := schemas.MustMarshal(v)
		path := make([]string, 1+r.IntN(2))
		for j := range path {
			path[j] = names[r.IntN(len(names))]
		}
		want, werr := referenceKey(data, path)
		got, gerr := lookupCBOR(data, path)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !bytes.Equal(got, want) {
			t.Fatalf("value %x path %v: lookupCBOR (%x, %v), reference (%x, %v)", data, path, got, gerr, want, werr)
		}
		checked[gerr == nil]++
	}
	if checked[true] < 2000 || checked[false] < 2000 {
		t.Fatalf("too few cases of one kind: %v found, %v not", checked[true], checked[false])
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLookupCBORMalformed: truncated or non-canonical-shaped input is an
// error, never a panic or a wrong key.
func TestLookupCBORMalformed(t *testing.T) {
	data := schemas.MustMarshal(map[string]any{"id": "order-1", "n": []any{int64(1), "x"}})
	for i := 0; i < len(data); i++ {
		if k, err := lookupCBOR(data[:i], []string{"id"}); err == nil && !bytes.Equal(k, schemas.MustMarshal("order-1")) {
			t.Fatalf("truncated at %d: key %x", i, k)
		}
	}
	for _, bad := range [][]byte{{0xbf}, {0xa1, 0x01, 0x02}, {0xa1, 0x61}, {0xc1, 0x00}, {0xa1, 0x62, 'i', 'd', 0x7f}} {
		if _, err := lookupCBOR(bad, []string{"id"}); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}
