package randval

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// Seeded returns a generator with a random seed, logged so that a failing
// run can be replayed with New.
func Seeded(t testing.TB) *Gen {
	t.Helper()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	return New(seed)
}

// CheckMarshal fails t unless got is exactly schemas.Marshal(v): a hand
// encoder's output held to the reflection-based canonical encoder.
func CheckMarshal(t testing.TB, what string, got []byte, v any) {
	t.Helper()
	want, err := schemas.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: hand encoder\n%x\nreflection encoder\n%x\nvalue %+v", what, got, want, v)
	}
}

// Gen draws values from one seeded source. It is not safe for concurrent use.
type Gen struct{ R *rand.Rand }

// New returns a generator seeded with seed.
func New(seed uint64) *Gen { return &Gen{R: rand.New(rand.NewPCG(seed, 7))} }

// Num is an integer at a random CBOR head width, the largest values included.
func (g *Gen) Num() uint64 {
	r := g.R
	switch r.IntN(6) {
	case 0:
		return uint64(r.IntN(24))
	case 1:
		return 24 + uint64(r.IntN(232))
	case 2:
		return 256 + uint64(r.IntN(65280))
	case 3:
		return 65536 + uint64(r.Uint32())
	case 4:
		return 1<<32 + r.Uint64()>>1
	}
	return ^uint64(0) - uint64(r.IntN(3))
}

// Bytes is nil, empty or up to 299 random bytes.
func (g *Gen) Bytes() []byte {
	r := g.R
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(300))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Str is empty or a run of up to 39 copies of one letter.
func (g *Gen) Str() string {
	r := g.R
	if r.IntN(4) == 0 {
		return ""
	}
	return string(bytes.Repeat([]byte{'a' + byte(r.IntN(26))}, r.IntN(40)))
}

// Hash is the hash of random bytes.
func (g *Gen) Hash() schemas.Hash { return schemas.HashBytes(g.Bytes()) }
