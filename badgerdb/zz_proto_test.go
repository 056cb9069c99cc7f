package badgerdb

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func BenchmarkProtoFlush(b *testing.B) {
	for _, size := range []int{150, 15000} {
		val := make([]byte, size)
		for _, mode := range []string{"dbsync", "sidelog", "sidelog-zeroed"} {
			b.Run(fmt.Sprintf("%s/bytes=%d", mode, size), func(b *testing.B) {
				dir := b.TempDir()
				db, err := Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				f, err := os.OpenFile(filepath.Join(dir, "side.log"), os.O_CREATE|os.O_RDWR, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if mode == "sidelog-zeroed" {
					if _, err := f.Write(make([]byte, 64<<20)); err != nil {
						b.Fatal(err)
					}
					f.Sync()
				}
				var off int64
				b.ResetTimer()
				for i := range b.N {
					txn := db.db.NewTransaction(true)
					if err := txn.Set(frameKey(uint64(i+1)), val); err != nil {
						b.Fatal(err)
					}
					if err := txn.Commit(); err != nil {
						b.Fatal(err)
					}
					if mode == "dbsync" {
						if err := db.db.Sync(); err != nil {
							b.Fatal(err)
						}
						continue
					}
					var hdr [8]byte
					binary.BigEndian.PutUint64(hdr[:], uint64(len(val)))
					if _, err := f.WriteAt(hdr[:], off); err != nil {
						b.Fatal(err)
					}
					if _, err := f.WriteAt(val, off+8); err != nil {
						b.Fatal(err)
					}
					off += int64(8 + len(val))
					if err := unix.Fdatasync(int(f.Fd())); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
