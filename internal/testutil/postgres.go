package testutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/pgserver"
)

// opTimeout bounds each step against the cluster: starting it, migrating a
// template, creating or dropping a database.
const opTimeout = 2 * time.Minute

// clusterSettings trade durability, which tests do not need, for speed.
var clusterSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
}

var (
	// clusterOnce starts the cluster the tests of this binary share and sets the following.
	clusterOnce sync.Once
	cluster     *pgserver.Server
	clusterDir  string
	clusterErr  error

	// createMu serializes CREATE DATABASE, which fails if another session is
	// connected to the template it copies.
	createMu sync.Mutex

	// dbSeq makes database names unique within the cluster.
	dbSeq atomic.Int64
)

// MigrateFunc brings an empty database to the schema a package's tests expect.
type MigrateFunc func(ctx context.Context, conn *pgx.Conn) error

// Template is a migrated database that Postgres clones for each test. Keep
// one per package in a package-level variable so that it is migrated once
// per test binary:
//
//	var pgTemplate = testutil.NewTemplate("store", store.Migrate)
type Template struct {
	label   string
	migrate MigrateFunc

	// once migrates the template and sets the following.
	once   sync.Once
	dbName string
	err    error
}

// NewTemplate returns a Template that migrate sets up the first time a test
// asks for it. The label only makes the databases easy to recognize.
func NewTemplate(label string, migrate MigrateFunc) *Template {
	return &Template{label: label, migrate: migrate}
}

// Postgres returns a connection string for a new database that t alone uses:
// a clone of tmpl, or an empty database if tmpl is nil. The database is
// dropped when t finishes, even if connections to it are still open. All the
// databases of a test binary live in one cluster, started on first use and
// stopped by Main. Postgres fails t if PostgreSQL is not installed.
func Postgres(t testing.TB, tmpl *Template) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("testutil.Postgres needs the package's TestMain to call testutil.Main, " +
			"which stops the cluster: func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }")
	}
	srv, err := sharedCluster()
	if err != nil {
		t.Fatalf("start PostgreSQL for tests: %v", err)
	}
	source := "template1"
	if tmpl != nil {
		if source, err = tmpl.prepare(srv); err != nil {
			t.Fatal(err)
		}
	}
	name := dbName("t", t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := createDatabase(ctx, srv, name, source); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := adminExec(ctx, srv, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return srv.ConnString(name)
}

// prepare creates and migrates the template database once and returns its name.
func (tmpl *Template) prepare(srv *pgserver.Server) (string, error) {
	tmpl.once.Do(func() {
		tmpl.dbName, tmpl.err = tmpl.create(srv)
		if tmpl.err != nil {
			tmpl.err = fmt.Errorf("template %q: %w", tmpl.label, tmpl.err)
		}
	})
	return tmpl.dbName, tmpl.err
}

func (tmpl *Template) create(srv *pgserver.Server) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	name := dbName("tmpl", tmpl.label)
	if err := createDatabase(ctx, srv, name, "template1"); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	if tmpl.migrate != nil {
		conn, err := pgx.Connect(ctx, srv.ConnString(name))
		if err != nil {
			return "", fmt.Errorf("connect: %w", err)
		}
		err = tmpl.migrate(ctx, conn)
		if closeErr := conn.Close(ctx); err == nil {
			err = closeErr
		}
		if err != nil {
			return "", fmt.Errorf("migrate: %w", err)
		}
	}
	// Cloning fails while anyone is connected to the template: end the
	// sessions a migration may have left open and allow no new ones.
	err := adminExec(ctx, srv, "ALTER DATABASE "+ident(name)+" WITH ALLOW_CONNECTIONS false; "+
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+name+"'")
	if err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	return name, nil
}

// sharedCluster starts the cluster on first use, in a fresh temporary directory.
func sharedCluster() (*pgserver.Server, error) {
	clusterOnce.Do(func() {
		clusterDir, clusterErr = os.MkdirTemp("", "gpuaas-testpg-")
		if clusterErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		cluster, clusterErr = pgserver.Start(ctx, pgserver.Config{
			DataDir:  clusterDir,
			Logger:   slog.New(slog.DiscardHandler),
			Settings: clusterSettings,
		})
		if clusterErr != nil {
			os.RemoveAll(clusterDir)
		}
	})
	return cluster, clusterErr
}

// stopCluster stops the cluster, if one was started, and removes its directory.
func stopCluster() error {
	// Spend the once, so that nothing can start a cluster after this.
	clusterOnce.Do(func() { clusterErr = errors.New("testutil: the tests are over") })
	if cluster == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return errors.Join(cluster.Stop(ctx), os.RemoveAll(clusterDir))
}

func createDatabase(ctx context.Context, srv *pgserver.Server, name, template string) error {
	createMu.Lock()
	defer createMu.Unlock()
	return adminExec(ctx, srv, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(template))
}

// adminExec runs sql in the cluster's postgres database, on a connection of its own.
func adminExec(ctx context.Context, srv *pgserver.Server, sql string) error {
	conn, err := pgx.Connect(ctx, srv.ConnString("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// dbName returns a new database name: prefix, a sequence number and as much
// of label as fits, in letters, digits and underscores.
func dbName(prefix, label string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			return r
		case 'A' <= r && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, label)
	name := fmt.Sprintf("%s%d_%s", prefix, dbSeq.Add(1), clean)
	return name[:min(len(name), 63)] // PostgreSQL's NAMEDATALEN - 1
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
