package pgdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ErrNoFile reports a world file the database does not hold. It wraps
// fs.ErrNotExist, so a caller that reads a directory's file or the
// database's alike tests one condition.
var ErrNoFile = fmt.Errorf("pgdb: no such world file: %w", fs.ErrNotExist)

// ReadFile returns the world file name (the world_files table: the bytes a
// Badger world keeps as a file of its directory, such as its API token).
// A file never written is ErrNoFile.
func (d *DB) ReadFile(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	err := d.pool.QueryRow(ctx, "SELECT data FROM world_files WHERE name = $1", name).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s (schema %s)", ErrNoFile, name, d.cfg.Schema)
	}
	if err != nil {
		return nil, fmt.Errorf("pgdb: read world file %s (schema %s): %w", name, d.cfg.Schema, err)
	}
	return nonNil(data), nil
}

// writeFilesSQL stores one file while the partition's epoch is $1: the
// fence's row is locked in share mode, so an Acquire either waits for the
// write or is seen by it, as for the CAS's deletes.
const writeFilesSQL = `
WITH fence AS (SELECT part FROM partitions WHERE part = 0 AND epoch = $1 FOR SHARE)
INSERT INTO world_files (name, data) SELECT $2, $3 FROM fence
ON CONFLICT (name) DO UPDATE SET data = excluded.data, updated_at = now()`

// WriteFiles stores files (name -> bytes), replacing those of the same
// names, in one transaction that commits only while l's epoch is the
// partition's: a fenced owner (ErrFenced) changes nothing, so a token
// rotated or a key trusted by a node that lost its lease cannot overwrite
// what the new owner wrote. The commit is durable when it returns.
func (d *DB) WriteFiles(ctx context.Context, l Lease, files map[string][]byte) error {
	if len(files) == 0 {
		return nil
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if n == "" {
			return errors.New("pgdb: write world files: a file has no name")
		}
		names = append(names, n)
	}
	slices.Sort(names) // the same lock order in every writer
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgdb: write world files %v: %w", names, err)
	}
	defer tx.Rollback(ctx)
	for _, n := range names {
		tag, err := tx.Exec(ctx, writeFilesSQL, int64(l.Epoch), n, nonNil(files[n]))
		if err != nil {
			return fmt.Errorf("pgdb: write world file %s: %w", n, err)
		}
		if tag.RowsAffected() != 1 {
			tx.Rollback(ctx)
			return fmt.Errorf("write world file %s: %w", n, d.fencedError(ctx, "write", l.Epoch))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgdb: write world files %v: commit: %w", names, err)
	}
	return nil
}

// FileNames lists the world files the database holds, sorted.
func (d *DB) FileNames(ctx context.Context) ([]string, error) {
	rows, err := d.pool.Query(ctx, "SELECT name FROM world_files ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("pgdb: list world files (schema %s): %w", d.cfg.Schema, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgdb: list world files (schema %s): %w", d.cfg.Schema, err)
	}
	return names, nil
}
