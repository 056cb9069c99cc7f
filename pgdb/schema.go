package pgdb

import (
	"context"
	"fmt"
)

// migration is one step of the schema's history. Steps are applied in
// order, each once, in the transaction that records it in
// schema_migrations; a step is never edited once released, only followed
// by another.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the schema's whole history; the last one's version is the
// version this aos writes and understands.
var migrations = []migration{
	{1, "partitions with their lease and journal head, frames, the kind index, objects", `
CREATE TABLE partitions (
	part        integer PRIMARY KEY CHECK (part >= 0),
	epoch       bigint  NOT NULL DEFAULT 0 CHECK (epoch >= 0),
	owner       text    NOT NULL DEFAULT '',
	address     text    NOT NULL DEFAULT '',
	lease_until timestamptz,
	height      bigint  NOT NULL DEFAULT 0 CHECK (height >= 0),
	first       bigint  NOT NULL DEFAULT 1 CHECK (first >= 1 AND first <= height + 1)
);
CREATE TABLE frames (
	part      integer NOT NULL,
	first_seq bigint  NOT NULL CHECK (first_seq >= 1),
	last_seq  bigint  NOT NULL,
	frame     bytea   NOT NULL,
	PRIMARY KEY (part, first_seq),
	CHECK (last_seq >= first_seq)
);
ALTER TABLE frames ALTER COLUMN frame SET STORAGE EXTERNAL;
CREATE TABLE marks (
	part integer NOT NULL,
	kind text    NOT NULL,
	seq  bigint  NOT NULL,
	PRIMARY KEY (part, kind, seq)
);
CREATE TABLE objects (
	hash bytea PRIMARY KEY CHECK (octet_length(hash) = 32),
	data bytea NOT NULL
);
ALTER TABLE objects ALTER COLUMN data SET STORAGE EXTERNAL;
INSERT INTO partitions (part) VALUES (0);
`},
	{2, "world files: the token, the executor key, the trusted keys", `
CREATE TABLE world_files (
	name       text PRIMARY KEY CHECK (name <> ''),
	data       bytea NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
`},
}

// SchemaVersion is the version of the schema this aos writes: the last
// migration's.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// migrate brings the schema to SchemaVersion in one transaction, holding a
// transaction-scoped advisory lock on the schema's name so that two aos
// processes opening one database at once migrate it once. A schema at a
// version newer than this aos knows is refused with ErrSchemaNewer and left
// untouched.
func (d *DB) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgdb: migrate schema %s: %w", d.cfg.Schema, err)
	}
	defer tx.Rollback(ctx)
	steps := []string{
		"SELECT pg_advisory_xact_lock(hashtextextended('aos schema ' || $1, 0))",
		"CREATE SCHEMA IF NOT EXISTS " + d.schema,
		"SET LOCAL search_path TO " + d.schema,
		`CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`,
	}
	for i, s := range steps {
		var args []any
		if i == 0 {
			args = []any{d.cfg.Schema}
		}
		if _, err := tx.Exec(ctx, s, args...); err != nil {
			return fmt.Errorf("pgdb: migrate schema %s: %w", d.cfg.Schema, err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("pgdb: migrate schema %s: read its version: %w", d.cfg.Schema, err)
	}
	if have > SchemaVersion() {
		return fmt.Errorf("%w: schema %s is at version %d (schema_migrations), this aos knows versions up to %d: run a newer aos, or give this one another schema",
			ErrSchemaNewer, d.cfg.Schema, have, SchemaVersion())
	}
	for _, m := range migrations {
		if m.version <= have {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("pgdb: migrate schema %s to version %d (%s): %w", d.cfg.Schema, m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return fmt.Errorf("pgdb: migrate schema %s to version %d: record it: %w", d.cfg.Schema, m.version, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgdb: migrate schema %s: commit: %w", d.cfg.Schema, err)
	}
	return nil
}
