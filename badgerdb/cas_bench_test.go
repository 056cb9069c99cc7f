package badgerdb_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/schemas"
)

// object returns a distinct 256-byte object for i.
func object(i uint64) []byte {
	b := make([]byte, 256)
	rng := rand.New(rand.NewPCG(i, 1))
	for k := 0; k < len(b); k += 8 {
		binary.LittleEndian.PutUint64(b[k:], rng.Uint64())
	}
	return b
}

func benchStore(b *testing.B) *badgerdb.CAS {
	db := openDisk(b, b.TempDir())
	b.Cleanup(func() { db.Close() })
	return db.CAS()
}

// BenchmarkBadgerPut puts one object at a time; guard=off turns the
// free-space guard off (space.go), to show its cost on the cheapest write.
func BenchmarkBadgerPut(b *testing.B) {
	for _, guard := range []bool{true, false} {
		b.Run("guard="+onOff(guard), func(b *testing.B) {
			db := openDisk(b, b.TempDir())
			b.Cleanup(func() { db.Close() })
			if !guard {
				db.WithoutGuard()
			}
			s := db.CAS()
			objs := make([][]byte, b.N)
			for i := range objs {
				objs[i] = object(uint64(i))
			}
			b.SetBytes(256)
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Put(objs[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBadgerPutBatch100x256B(b *testing.B) {
	s := benchStore(b)
	batches := make([][][]byte, b.N)
	for i := range batches {
		batches[i] = make([][]byte, 100)
		for k := range batches[i] {
			batches[i][k] = object(uint64(i*100 + k))
		}
	}
	b.SetBytes(100 * 256)
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.PutBatch(batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "objects/s")
}

func BenchmarkBadgerGetHit(b *testing.B) {
	s := benchStore(b)
	const n = 10_000
	hs := make([]schemas.Hash, 0, n)
	for i := range n / 100 {
		batch := make([][]byte, 100)
		for k := range batch {
			batch[k] = object(uint64(i*100 + k))
		}
		got, err := s.PutBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		hs = append(hs, got...)
	}
	b.SetBytes(256)
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Get(hs[i%n]); err != nil {
			b.Fatal(err)
		}
	}
}
