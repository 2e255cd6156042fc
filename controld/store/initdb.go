package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// InitDBConfig says what InitDB creates.
type InitDBConfig struct {
	// LoginRole is the role controld logs in as (and owns the schema).
	// Created with LOGIN and without SUPERUSER, CREATEROLE or CREATEDB.
	LoginRole string
	// Password, when set, becomes LoginRole's password.
	Password string
	// Database is controld's database, created owned by LoginRole.
	Database string
}

// InitDBResult says what InitDB did; a second run creates nothing.
type InitDBResult struct {
	CreatedAppRole, CreatedLoginRole, CreatedDatabase, SetPassword bool
}

// InitDB prepares a Postgres cluster for controld, once, over conn (a
// superuser's, or a role with CREATEROLE and CREATEDB): AppRole, the
// login role as its member, and the database owned by the login role.
// controld's migrations then run as the login role with no right to
// create roles. Running it again changes nothing but the password.
func InitDB(ctx context.Context, conn *pgx.Conn, cfg InitDBConfig) (InitDBResult, error) {
	var res InitDBResult
	if cfg.LoginRole == "" || cfg.Database == "" {
		return res, errors.New("init-db: the login role and the database are required")
	}
	if cfg.LoginRole == AppRole {
		return res, fmt.Errorf("init-db: the login role cannot be %s (controld's pool switches to it)", AppRole)
	}
	var me string
	var super, createRole, createDB bool
	err := conn.QueryRow(ctx, `SELECT rolname, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user`).
		Scan(&me, &super, &createRole, &createDB)
	if err != nil {
		return res, fmt.Errorf("init-db: read own role: %w", err)
	}
	if !super && !(createRole && createDB) {
		return res, fmt.Errorf("%w; %s has neither", ErrInitDBRights, me)
	}
	if res.CreatedAppRole, err = ensureRole(ctx, conn, AppRole, "NOLOGIN"); err != nil {
		return res, err
	}
	if res.CreatedLoginRole, err = ensureRole(ctx, conn, cfg.LoginRole, "LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB"); err != nil {
		return res, err
	}
	login := pgx.Identifier{cfg.LoginRole}.Sanitize()
	if cfg.Password != "" {
		// DDL takes no parameters: format's %L quotes the literal.
		var stmt string
		if err := conn.QueryRow(ctx, `SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)`,
			cfg.LoginRole, cfg.Password).Scan(&stmt); err != nil {
			return res, fmt.Errorf("init-db: password statement: %w", err)
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return res, fmt.Errorf("init-db: set the password of %s: %w", cfg.LoginRole, err)
		}
		res.SetPassword = true
	}
	var member bool
	if err := conn.QueryRow(ctx, `SELECT pg_has_role($1, $2, 'MEMBER')`, cfg.LoginRole, AppRole).Scan(&member); err != nil {
		return res, fmt.Errorf("init-db: membership: %w", err)
	}
	if !member {
		if _, err := conn.Exec(ctx, "GRANT "+AppRole+" TO "+login); err != nil {
			return res, fmt.Errorf("init-db: grant %s to %s: %w", AppRole, cfg.LoginRole, err)
		}
	}
	var owner string
	err = conn.QueryRow(ctx, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, cfg.Database).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// CREATE DATABASE cannot run in a transaction; Exec of a single
		// statement does not open one.
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" OWNER "+login); err != nil {
			return res, fmt.Errorf("init-db: create database %s: %w", cfg.Database, err)
		}
		res.CreatedDatabase = true
	case err != nil:
		return res, fmt.Errorf("init-db: look up database %s: %w", cfg.Database, err)
	case owner != cfg.LoginRole:
		return res, fmt.Errorf("init-db: database %s exists and is owned by %s, not %s (ALTER DATABASE %s OWNER TO %s, if it is controld's)",
			cfg.Database, owner, cfg.LoginRole, cfg.Database, cfg.LoginRole)
	}
	return res, nil
}

// ensureRole creates role with attrs when it does not exist and reports
// whether it did.
func ensureRole(ctx context.Context, conn *pgx.Conn, role, attrs string) (bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return false, fmt.Errorf("init-db: look up role %s: %w", role, err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" "+attrs); err != nil {
		return false, fmt.Errorf("init-db: create role %s: %w", role, err)
	}
	return true, nil
}
