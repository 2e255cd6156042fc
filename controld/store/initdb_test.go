package store_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// as returns connString with another user and database.
func as(t *testing.T, connString, user, db string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, user, db)
}

func connect(t *testing.T, connString string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// uniqueRole is a role name of this test alone (roles are cluster-wide).
func uniqueRole(t *testing.T, super *pgx.Conn, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%x", prefix, rand.Text()[:8])
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = super.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name + "_db"}.Sanitize()+" WITH (FORCE)")
		if _, err := super.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	return name
}

// TestInitDBThenMigrateWithoutCreateRole is a regression test (README,
// "Operators: first admin"):
// after init-db (as a superuser), controld's login role has no CREATEROLE
// and still applies every migration; a second init-db creates nothing.
func TestInitDBThenMigrateWithoutCreateRole(t *testing.T) {
	ctx := context.Background()
	superURL := testutil.Postgres(t, nil)
	super := connect(t, superURL)
	role := uniqueRole(t, super, "ctl")
	db := role + "_db"

	res, err := store.InitDB(ctx, super, store.InitDBConfig{LoginRole: role, Database: db, Password: "pw 'quoted'"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.CreatedLoginRole || !res.CreatedDatabase || !res.SetPassword {
		t.Fatalf("first init-db: got %+v; want the login role and database created, the password set", res)
	}
	var canLogin, createRole, createDB, superuser bool
	if err := super.QueryRow(ctx, `SELECT rolcanlogin, rolcreaterole, rolcreatedb, rolsuper FROM pg_roles WHERE rolname = $1`, role).
		Scan(&canLogin, &createRole, &createDB, &superuser); err != nil {
		t.Fatal(err)
	}
	if !canLogin || createRole || createDB || superuser {
		t.Fatalf("login role: login %v createrole %v createdb %v super %v; want login only", canLogin, createRole, createDB, superuser)
	}
	if err := store.MigrateURL(ctx, as(t, superURL, role, db)); err != nil {
		t.Fatalf("migrate as %s after init-db: %v", role, err)
	}
	again, err := store.InitDB(ctx, super, store.InitDBConfig{LoginRole: role, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	if again != (store.InitDBResult{}) {
		t.Fatalf("second init-db: got %+v; want nothing created", again)
	}
}

// TestMigrateWithoutInitDBSaysSo: a login role that init-db did not make
// a member of gpuaas_app gets ErrRoleSetup, not only Postgres's words; and
// init-db run as such a role says it needs a superuser.
func TestMigrateWithoutInitDBSaysSo(t *testing.T) {
	ctx := context.Background()
	superURL := testutil.Postgres(t, nil)
	super := connect(t, superURL)
	role := uniqueRole(t, super, "bare")
	db := role + "_db"
	if _, err := super.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, "CREATE DATABASE "+db+" OWNER "+role); err != nil {
		t.Fatal(err)
	}
	// gpuaas_app may or may not exist in the shared cluster: either way
	// the bare role can neither create nor join it.
	err := store.MigrateURL(ctx, as(t, superURL, role, db))
	if !errors.Is(err, store.ErrRoleSetup) {
		t.Fatalf("migrate as a bare role: got %v; want ErrRoleSetup", err)
	}
	_, err = store.InitDB(ctx, connect(t, as(t, superURL, role, db)), store.InitDBConfig{LoginRole: "x", Database: "y"})
	if !errors.Is(err, store.ErrInitDBRights) {
		t.Fatalf("init-db as a bare role: got %v; want ErrInitDBRights", err)
	}
}
