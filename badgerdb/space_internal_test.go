package badgerdb

import "testing"

// BenchmarkGuard is what the free-space guard adds to every write: one
// admit (an fstatfs of the store's directory and a few atomics) and its
// release, on a store on disk.
func BenchmarkGuard(b *testing.B) {
	db, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var c cost
	c.add(objectKeyLen, 256)
	b.ResetTimer()
	for range b.N {
		if err := db.space.admit(c); err != nil {
			b.Fatal(err)
		}
		db.space.release(c)
	}
}
