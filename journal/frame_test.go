package journal

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

func randomFrame(r *rand.Rand) []Record {
	kinds := []Kind{KindEvent, KindStep, KindIntent, KindReceipt, KindDrop, KindFrame, KindManifest, KindSnapshot, KindFault, "", "custom-kind"}
	recs := make([]Record, r.IntN(40))
	seq := []uint64{1, 23, 24, 255, 256, 65535, 65536, 1 << 32, 1<<64 - 50}[r.IntN(9)]
	for i := range recs {
		body := make([]byte, []int{0, 1, 23, 24, 255, 256, 70000}[r.IntN(7)])
		for j := range body {
			body[j] = byte(r.Uint32())
		}
		recs[i] = Record{Seq: seq + uint64(i), Kind: kinds[r.IntN(len(kinds))], Body: body}
	}
	return recs
}

// The hand-written frame codec writes the library's bytes and reads back
// what the library reads, at every head width.
func TestFrameCodecMatchesLibrary(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 300 {
		recs := randomFrame(r)
		want, err := schemas.Marshal(recs)
		if err != nil {
			t.Fatal(err)
		}
		got := EncodeFrame(recs)
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeFrame differs from the library for %d records", len(recs))
		}
		dec, ok := decodeFrameFast(got)
		if !ok {
			t.Fatalf("decodeFrameFast refused its own encoding of %d records", len(recs))
		}
		var lib []Record
		if err := schemas.UnmarshalTrusted(got, &lib); err != nil {
			t.Fatal(err)
		}
		if len(dec) != len(lib) || (len(dec) > 0 && !reflect.DeepEqual(dec, lib)) {
			t.Fatalf("decodeFrameFast and the library disagree on %d records", len(recs))
		}
		// Bodies share one buffer but cannot grow into each other.
		for i := range dec {
			if cap(dec[i].Body) != len(dec[i].Body) {
				t.Fatalf("record %d body has spare capacity %d", i, cap(dec[i].Body)-len(dec[i].Body))
			}
		}
	}
	for _, bad := range [][]byte{nil, {0x9f}, {0x81, 0xa3}, {0x81, 0xa2, 0x63, 's', 'e', 'q', 1}, append(EncodeFrame([]Record{{Seq: 1, Kind: KindStep, Body: []byte{1}}}), 0)} {
		if _, ok := decodeFrameFast(bad); ok {
			t.Fatalf("decodeFrameFast accepted %x", bad)
		}
	}
}

// Whatever the fast decoder accepts, the library accepts with the same
// records; what it refuses goes to the library, so it may refuse freely.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(EncodeFrame([]Record{{Seq: 1, Kind: KindEvent, Body: []byte{0xa0}}, {Seq: 2, Kind: KindStep, Body: []byte{1, 2}}}))
	f.Add(EncodeFrame(nil))
	f.Add([]byte{0x81, 0xa3, 0x63, 's', 'e', 'q', 0x1b, 0, 0, 0, 0, 0, 0, 0, 1, 0x64, 'b', 'o', 'd', 'y', 0x40, 0x64, 'k', 'i', 'n', 'd', 0x60})
	f.Fuzz(func(t *testing.T, data []byte) {
		dec, ok := decodeFrameFast(data)
		if !ok {
			return
		}
		var lib []Record
		if err := schemas.UnmarshalTrusted(data, &lib); err != nil {
			t.Fatalf("fast decoder accepted what the library refuses: %v", err)
		}
		if len(dec) != len(lib) || (len(dec) > 0 && !reflect.DeepEqual(dec, lib)) {
			t.Fatalf("decoders disagree:\nfast %+v\nlib  %+v", dec, lib)
		}
	})
}
