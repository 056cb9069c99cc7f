package pgdb_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
)

// The append path and CAS puts on the test cluster (fsync and
// synchronous_commit on, on the machine's disk), beside Badger's on the
// same disk in the same run: go test -run '^$' -bench . ./pgdb

// appender is what the append benchmarks drive.
type appender interface {
	Height() uint64
	Append([]journal.Record) error
}

// benchAppend appends frames of n records with 150-byte bodies.
func benchAppend(b *testing.B, j appender, n int) {
	body := make([]byte, 150)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	frame := make([]journal.Record, n)
	for k := range frame {
		frame[k] = journal.Record{Kind: journal.KindStep, Body: body}
	}
	b.SetBytes(int64(n * len(body)))
	b.ResetTimer()
	for range b.N {
		next := j.Height() + 1
		for k := range frame {
			frame[k].Seq = next + uint64(k)
		}
		if err := j.Append(frame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
}

func badgerBench(b *testing.B) *badgerdb.DB {
	db, err := badgerdb.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("postgres/frame=%d", n), func(b *testing.B) {
			_, _, j := owned(b)
			benchAppend(b, j, n)
		})
		b.Run(fmt.Sprintf("badger/frame=%d", n), func(b *testing.B) {
			benchAppend(b, badgerBench(b).Journal(), n)
		})
	}
	// The notifier (follow.go) off: what telling followers costs the
	// owner's appends.
	b.Run("postgres-no-notifier/frame=64", func(b *testing.B) {
		_, _, j := owned(b)
		j.Close()
		benchAppend(b, j, 64)
	})
}

// BenchmarkAppendShapes compares ways to store one group commit with the
// fence, on the same cluster: the frame as one row (what pgdb does), and
// one row per record by a multi-row insert (unnest) in the fence's
// statement or by COPY in a transaction after the fence's update (three
// round trips: the update, the copy, the commit).
func BenchmarkAppendShapes(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("frame-row/frame=%d", n), func(b *testing.B) {
			_, _, j := owned(b)
			benchAppend(b, j, n)
		})
		b.Run(fmt.Sprintf("record-rows-unnest/frame=%d", n), func(b *testing.B) {
			benchAppend(b, newRecordRows(b, false), n)
		})
		b.Run(fmt.Sprintf("record-rows-copy/frame=%d", n), func(b *testing.B) {
			benchAppend(b, newRecordRows(b, true), n)
		})
	}
}

// recordRows is a fenced journal storing one row per record, for
// BenchmarkAppendShapes only.
type recordRows struct {
	pool   *pgxpool.Pool
	copy   bool
	height uint64
}

func newRecordRows(b *testing.B, copy bool) *recordRows {
	w := newWorld(b)
	db := w.open(b)
	acquire(b, db, "node-a", false)
	w.sql(b, "CREATE TABLE records (part integer, seq bigint, kind text, body bytea, PRIMARY KEY (part, seq))")
	pc, err := pgxpool.ParseConfig(w.url)
	if err != nil {
		b.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = w.schema
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return &recordRows{pool: pool, copy: copy}
}

func (r *recordRows) Height() uint64 { return r.height }

func (r *recordRows) Append(recs []journal.Record) error {
	ctx := context.Background()
	last := recs[len(recs)-1].Seq
	seqs, kinds, bodies := make([]int64, len(recs)), make([]string, len(recs)), make([][]byte, len(recs))
	for i, rc := range recs {
		seqs[i], kinds[i], bodies[i] = int64(rc.Seq), string(rc.Kind), rc.Body
	}
	const fence = "UPDATE partitions SET height = $3 WHERE part = 0 AND epoch = $1 AND height = $2"
	if !r.copy {
		tag, err := r.pool.Exec(ctx, "WITH fence AS ("+fence+" RETURNING part) "+
			"INSERT INTO records SELECT f.part, x.seq, x.kind, x.body FROM fence f, unnest($4::bigint[], $5::text[], $6::bytea[]) AS x(seq, kind, body)",
			1, int64(r.height), int64(last), seqs, kinds, bodies)
		if err == nil && tag.RowsAffected() != int64(len(recs)) {
			err = fmt.Errorf("fenced: %d rows", tag.RowsAffected())
		}
		if err != nil {
			return err
		}
		r.height = last
		return nil
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, fence, 1, int64(r.height), int64(last))
	if err != nil || tag.RowsAffected() != 1 {
		return fmt.Errorf("fence: %v, %d rows", err, tag.RowsAffected())
	}
	rows := make([][]any, len(recs))
	for i := range recs {
		rows[i] = []any{0, seqs[i], kinds[i], bodies[i]}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"records"}, []string{"part", "seq", "kind", "body"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	r.height = last
	return nil
}

// object returns a distinct 256-byte object for i.
func object(i uint64) []byte {
	out := make([]byte, 256)
	rng := rand.New(rand.NewPCG(i, 1))
	for k := 0; k < len(out); k += 8 {
		binary.LittleEndian.PutUint64(out[k:], rng.Uint64())
	}
	return out
}

func BenchmarkCASPut(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) cas.Store
	}{
		{"postgres", func(b *testing.B) cas.Store { db, l, _ := owned(b); return db.CAS(&l) }},
		{"badger", func(b *testing.B) cas.Store { return badgerBench(b).CAS() }},
	}
	for _, s := range stores {
		b.Run(s.name+"/put", func(b *testing.B) {
			st := s.open(b)
			objs := make([][]byte, b.N)
			for i := range objs {
				objs[i] = object(uint64(i))
			}
			b.SetBytes(256)
			b.ResetTimer()
			for i := range b.N {
				if _, err := st.Put(objs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
		b.Run(s.name+"/batch=100x256B", func(b *testing.B) {
			st := s.open(b)
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
				if _, err := st.PutBatch(batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}
