package badgerdb

import (
	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/journal"
)

// Badger exposes the database so tests can forge and count keys.
func (d *DB) Badger() *badger.DB { return d.db }

// NewCAS is a CAS over a database opened with other options (e.g. the
// compression of older worlds).
func NewCAS(db *badger.DB) *CAS { return &CAS{db: db} }

// ForgetMarks deletes the kind index and its done flag: what a world
// written before the index existed holds.
func (d *DB) ForgetMarks() error {
	if err := d.db.DropPrefix([]byte(markPrefix)); err != nil {
		return err
	}
	return d.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(marksDoneKey)) })
}

// SetDropChunk makes DropBefore delete n frames per chunk, so tests cross
// chunk boundaries with few frames.
func (j *Journal) SetDropChunk(n int) { j.dropChunk = n }

// ForgeMark writes a mark for seq, as a drop interrupted between its
// chunk's First and its deletes leaves one behind.
func (d *DB) ForgeMark(k journal.Kind, seq uint64) error {
	return d.db.Update(func(txn *badger.Txn) error { return txn.Set(markKey(k, seq), nil) })
}

// ForgeFrame overwrites the frame stored under seq first.
func (d *DB) ForgeFrame(first uint64, v []byte) error {
	return d.db.Update(func(txn *badger.Txn) error { return txn.Set(frameKey(first), v) })
}
