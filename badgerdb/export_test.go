package badgerdb

import "github.com/dgraph-io/badger/v4"

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
