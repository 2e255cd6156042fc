// Package store holds controld's Postgres plumbing: the connection pool,
// the transaction helper and the numbered migrations. Domain packages own
// their tables and write their own SQL against the Querier given to them;
// each table has one owner, the only package that writes it
// (controld/ownership_test.go keeps the map and checks the SQL).
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Querier is what domain code needs to run SQL; a pool and a transaction
// both satisfy it, so the same function works inside and outside a tx.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Batcher is a Querier that can also send several queries in one round
// trip (a pool and a transaction both can): reads that need several
// owners' tables queue each owner's query in one pgx.Batch.
type Batcher interface {
	Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// AppRole is the database role controld does its normal work as
// (migration 0005): it may read and write every table but only read and
// append to the ledger.
const AppRole = "gpuaas_app"

// Open connects a pool to connString.
func Open(ctx context.Context, connString string, maxConns int32) (*pgxpool.Pool, error) {
	return OpenAs(ctx, connString, maxConns, "")
}

// OpenAs connects a pool to connString whose connections act as role
// (SET ROLE right after connecting) when role is not empty. The login
// role must be a member of role; it keeps owning the schema, and
// migrations run on connections of their own.
func OpenAs(ctx context.Context, connString string, maxConns int32, role string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	sessionLimits(&cfg.ConnConfig.Config)
	if role != "" {
		setRole := "SET ROLE " + pgx.Identifier{role}.Sanitize()
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			if _, err := c.Exec(ctx, setRole); err != nil {
				return fmt.Errorf("set role %s: %w", role, err)
			}
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// Migrate applies every pending numbered migration. Safe to run from
// several replicas at once: tern takes an advisory lock.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, "schema_version")
	if err != nil {
		return fmt.Errorf("migrator: %w", err)
	}
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		// 42501 insufficient_privilege, from migration 0005 creating or
		// granting AppRole: the one-time InitDB was not run.
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" && strings.Contains(pe.Message, "role") {
			return fmt.Errorf("migrate: %w: %w", ErrRoleSetup, err)
		}
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigrateURL runs Migrate on a connection of its own to connString, as the
// role it logs in as (the schema's owner).
func MigrateURL(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("connect to migrate: %w", err)
	}
	defer conn.Close(ctx)
	return Migrate(ctx, conn)
}

// MigratePool runs Migrate on a connection borrowed from pool.
func MigratePool(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer c.Release()
	return Migrate(ctx, c.Conn())
}

// InTx runs fn in a transaction, committing when fn returns nil.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

// IsGuardFailure reports whether err is a guard statement's failure: a
// "SELECT 1 / <condition>::int" queued in a pipeline fails with
// division_by_zero (SQLSTATE 22012) when its condition is false, and the
// server skips the rest of the pipeline, COMMIT included.
func IsGuardFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22012"
}

// IsUniqueViolation reports whether err is a unique-constraint violation,
// optionally of the named constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		return false
	}
	return constraint == "" || pe.ConstraintName == constraint
}

// CommitInBatch queues COMMIT last in b and sends b in tx: the
// transaction's last round trip (op names it in errors). A statement
// failing on the server skips the rest of the pipeline, the COMMIT with
// it, and leaves the transaction failed: committed is false and the
// caller rolls back. The whole batch is sent before any result is read,
// so an error with the connection idle afterwards is a check in this
// process (a result's callback) that failed after the server committed:
// committed is true, err says what failed, and what was written stands.
func CommitInBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch, op string) (committed bool, err error) {
	b.Queue(`COMMIT`).Fn = func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("commit %s: %w", op, err)
		}
		if tag.String() != "COMMIT" {
			return fmt.Errorf("commit %s: the server answered %s", op, tag)
		}
		return nil
	}
	err = tx.SendBatch(ctx, b).Close()
	return err == nil || tx.Conn().PgConn().TxStatus() == 'I', err
}
