package pgdb

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// CAS is a cas.Store over the objects table: the raw 32 hash bytes as key
// (bytea orders byte-wise, so the key order is the hash order Iterate
// promises), the object's bytes as value, stored out of line and
// uncompressed.
//
// Writes go through the asynchronous pool: they commit without waiting for
// the WAL flush, and the next journal append's synchronous commit flushes
// them too, as the WAL is one ordered log (doc.go, "Durability"). Deletes
// are fenced by the lease the CAS was made with, like the journal's
// writes: an owner whose lease passed on collects nothing.
type CAS struct {
	db    *DB
	epoch uint64 // the lease epoch Delete is fenced by; 0: deletes refused
}

var (
	_ cas.Store         = (*CAS)(nil)
	_ cas.MissingPutter = (*CAS)(nil)
)

// CAS is the world's content-addressed store, for the holder of l (nil:
// no lease, for a follower, which reads and may write objects but deletes
// nothing: Delete is ErrNotOwner).
func (d *DB) CAS(l *Lease) *CAS {
	c := &CAS{db: d}
	if l != nil {
		c.epoch = l.Epoch
	}
	return c
}

// putSQL stores an object; an object already stored is left as it is
// unless its stored bytes no longer hash to its key (the disk or someone
// corrupted them), and then they are replaced: a write heals a corrupt
// object rather than trusting it.
const putSQL = `
INSERT INTO objects (hash, data) VALUES ($1, $2)
ON CONFLICT (hash) DO UPDATE SET data = excluded.data WHERE sha256(objects.data) <> objects.hash`

// putBatchSQL is putSQL for many objects, given as two arrays.
const putBatchSQL = `
INSERT INTO objects (hash, data) SELECT * FROM unnest($1::bytea[], $2::bytea[])
ON CONFLICT (hash) DO UPDATE SET data = excluded.data WHERE sha256(objects.data) <> objects.hash`

// batchBytes bounds one statement of a PutBatch (its parameters travel in
// one message); a bigger batch is several statements sent together.
const batchBytes = 16 << 20

// Put stores data under its hash (putSQL).
func (c *CAS) Put(data []byte) (schemas.Hash, error) {
	h := schemas.HashBytes(data)
	ctx, cancel := c.db.ctx()
	defer cancel()
	if _, err := c.db.async.Exec(ctx, putSQL, h[:], nonNil(data)); err != nil {
		return h, fmt.Errorf("cas: put %s: %w", h, err)
	}
	return h, nil
}

// PutBatch stores objs (putBatchSQL), skipping objects repeated within
// objs, in statements of up to 16 MiB of objects sent in one round trip
// and one transaction. Hashes are returned in input order.
func (c *CAS) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	hs := make([]schemas.Hash, len(objs))
	for i, o := range objs {
		hs[i] = schemas.HashBytes(o)
	}
	if err := c.write(hs, objs, putBatchSQL); err != nil {
		return nil, fmt.Errorf("cas: put batch of %d objects: %w", len(objs), err)
	}
	return hs, nil
}

// write sends objs under their hashes hs with sql, each distinct hash
// once, in chunks of up to batchBytes, all in one batch.
func (c *CAS) write(hs []schemas.Hash, objs [][]byte, sql string) error {
	seen := make(map[schemas.Hash]struct{}, len(hs))
	var b pgx.Batch
	var keys, vals [][]byte
	size := 0
	flush := func() {
		if len(keys) > 0 {
			b.Queue(sql, keys, vals)
			keys, vals, size = nil, nil, 0
		}
	}
	for i, h := range hs {
		if _, dup := seen[h]; dup {
			continue
		}
		seen[h] = struct{}{}
		keys = append(keys, h[:])
		vals = append(vals, nonNil(objs[i]))
		if size += len(objs[i]); size >= batchBytes {
			flush()
		}
	}
	flush()
	if b.Len() == 0 {
		return nil
	}
	ctx, cancel := c.db.ctx()
	defer cancel()
	return c.db.async.SendBatch(ctx, &b).Close()
}

// PutMissing implements cas.MissingPutter: one query finds which of hs are
// stored (an index lookup each, no object read or sent), then the others
// are written, each once, after checking each hashes to its hs entry.
func (c *CAS) PutMissing(hs []schemas.Hash, objs [][]byte) (int, error) {
	if len(hs) != len(objs) {
		return 0, fmt.Errorf("cas: put missing: %d hashes for %d objects", len(hs), len(objs))
	}
	keys := make([][]byte, len(hs))
	for i := range hs {
		keys[i] = hs[i][:]
	}
	ctx, cancel := c.db.ctx()
	defer cancel()
	rows, err := c.db.pool.Query(ctx, `
SELECT DISTINCT h FROM unnest($1::bytea[]) AS u(h)
WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.hash = u.h)`, keys)
	if err != nil {
		return 0, fmt.Errorf("cas: put missing: %w", err)
	}
	absent := map[schemas.Hash]bool{}
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, fmt.Errorf("cas: put missing: %w", err)
		}
		if len(k) == len(schemas.Hash{}) {
			absent[schemas.Hash(k)] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("cas: put missing: %w", err)
	}
	var missing []int
	for i, h := range hs {
		if absent[h] {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	whs, write, err := cas.MissingObjects(hs, objs, missing)
	if err != nil {
		return 0, err
	}
	if err := c.write(whs, write, `
INSERT INTO objects (hash, data) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (hash) DO NOTHING`); err != nil {
		return 0, fmt.Errorf("cas: put missing: %w", err)
	}
	return len(write), nil
}

// Get returns the bytes stored under h after checking they hash to h.
func (c *CAS) Get(h schemas.Hash) ([]byte, error) {
	ctx, cancel := c.db.ctx()
	defer cancel()
	var data []byte
	err := c.db.pool.QueryRow(ctx, "SELECT data FROM objects WHERE hash = $1", h[:]).Scan(&data)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cas: get %s: %w", h, err)
	}
	return cas.Verified(h, data, err == nil)
}

// Has reports whether h is stored, without reading its value.
func (c *CAS) Has(h schemas.Hash) (bool, error) {
	ctx, cancel := c.db.ctx()
	defer cancel()
	var ok bool
	if err := c.db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM objects WHERE hash = $1)", h[:]).Scan(&ok); err != nil {
		return false, fmt.Errorf("cas: has %s: %w", h, err)
	}
	return ok, nil
}

// iterateChunk is how many objects one query of Iterate lists.
const iterateChunk = 8192

// Iterate calls fn for each object in hash order, with its size (read from
// the stored value's header, not its bytes). It lists the objects in
// chunks, each its own query after the last hash of the one before, and
// calls fn holding no connection: fn may use the store. An object written
// or deleted while Iterate runs is reported if its place was not yet
// passed and it is there when its chunk is read.
func (c *CAS) Iterate(fn func(h schemas.Hash, size int) error) error {
	type entry struct {
		h    schemas.Hash
		size int
	}
	after := []byte{}
	for {
		ctx, cancel := c.db.ctx()
		rows, err := c.db.pool.Query(ctx, "SELECT hash, octet_length(data) FROM objects WHERE hash > $1 ORDER BY hash LIMIT $2", after, iterateChunk)
		if err != nil {
			cancel()
			return fmt.Errorf("cas: iterate: %w", err)
		}
		var chunk []entry
		for rows.Next() {
			var k []byte
			var size int
			if err := rows.Scan(&k, &size); err != nil {
				break
			}
			if len(k) != len(schemas.Hash{}) {
				rows.Close()
				cancel()
				return fmt.Errorf("cas: iterate: malformed key %x", k)
			}
			chunk = append(chunk, entry{schemas.Hash(k), size})
		}
		rows.Close()
		cancel()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("cas: iterate: %w", err)
		}
		for _, e := range chunk {
			if err := fn(e.h, e.size); err != nil {
				return err
			}
		}
		if len(chunk) < iterateChunk {
			return nil
		}
		last := chunk[len(chunk)-1].h
		after = last[:]
	}
}

// deleteSQL deletes objects while $2 is the partition's epoch: the fence
// row is locked in share mode for the statement's transaction, so an
// Acquire (which updates it) waits for the delete or the delete finds the
// new epoch and deletes nothing. It answers whether the fence held.
const deleteSQL = `
WITH fence AS (
	SELECT part FROM partitions WHERE part = $3 AND epoch = $2 FOR SHARE
), gone AS (
	DELETE FROM objects WHERE hash = ANY($1::bytea[]) AND EXISTS (SELECT 1 FROM fence)
)
SELECT count(*) FROM fence`

// Delete removes objects, fenced by the CAS's lease (deleteSQL). Missing
// objects are ignored. Only garbage collection deletes: a collection by an
// owner whose lease passed on might delete what the new owner just wrote,
// so it is refused (ErrFenced), as it is without a lease (ErrNotOwner).
func (c *CAS) Delete(hs []schemas.Hash) error {
	if len(hs) == 0 {
		return nil
	}
	if c.epoch == 0 {
		return fmt.Errorf("cas: delete %d objects: %w", len(hs), ErrNotOwner)
	}
	keys := make([][]byte, len(hs))
	for i := range hs {
		keys[i] = hs[i][:]
	}
	ctx, cancel := c.db.ctx()
	defer cancel()
	var fenced int64
	if err := c.db.async.QueryRow(ctx, deleteSQL, keys, int64(c.epoch), part).Scan(&fenced); err != nil {
		return fmt.Errorf("cas: delete %d objects: %w", len(hs), err)
	}
	if fenced != 1 {
		return fmt.Errorf("cas: delete %d objects: %w", len(hs), c.db.fencedError(ctx, "delete", c.epoch))
	}
	return nil
}

// nonNil is b, or an empty slice for nil: pgx sends a nil []byte as NULL,
// and the empty object is an object like any other.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
