package testutil_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// migrations counts the runs of migrate: the template must be migrated once.
var migrations atomic.Int32

func migrate(ctx context.Context, conn *pgx.Conn) error {
	migrations.Add(1)
	_, err := conn.Exec(ctx, "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
	return err
}

var pgTemplate = testutil.NewTemplate("testutil", migrate)

func connect(t *testing.T, connString string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), connString)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func countItems(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil {
		t.Fatalf("count items: %v", err)
	}
	return n
}

func TestPostgresDatabasesAreSeparate(t *testing.T) {
	var dsns [2]string
	for i := range dsns {
		t.Run(fmt.Sprint("test", i), func(t *testing.T) {
			dsns[i] = testutil.Postgres(t, pgTemplate)
			conn := connect(t, dsns[i])
			if got := countItems(t, conn); got != 0 {
				t.Errorf("items in a new database: got %d; want 0 (data leaked from another test)", got)
			}
			if _, err := conn.Exec(t.Context(), "INSERT INTO items VALUES (1, 'written by test')"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if dsns[0] == dsns[1] {
		t.Errorf("both tests got %q", dsns[0])
	}
}

func TestPostgresParallel(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, testutil.Postgres(t, pgTemplate))
			for id := range i + 1 {
				if _, err := conn.Exec(t.Context(), "INSERT INTO items VALUES ($1, 'x')", id); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := countItems(t, conn), i+1; got != want {
				t.Errorf("items: got %d; want %d", got, want)
			}
		})
	}
	t.Cleanup(func() {
		if got := migrations.Load(); got != 1 {
			t.Errorf("migrations: got %d; want 1", got)
		}
	})
}

func TestPostgresWithoutTemplate(t *testing.T) {
	conn := connect(t, testutil.Postgres(t, nil))
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT to_regclass('items') IS NOT NULL").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("table items exists in an empty database")
	}
}

func TestPostgresDropsDatabase(t *testing.T) {
	var name string
	var leftOpen *pgx.Conn
	t.Run("user", func(t *testing.T) {
		// Left open on purpose: the drop must not wait for it.
		conn, err := pgx.Connect(t.Context(), testutil.Postgres(t, pgTemplate))
		if err != nil {
			t.Fatal(err)
		}
		leftOpen = conn
		if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "t") || !strings.Contains(name, "testpostgresdropsdatabase_user") {
			t.Errorf("database name %q does not name the test", name)
		}
	})
	if leftOpen != nil {
		leftOpen.Close(context.Background())
	}
	conn := connect(t, testutil.Postgres(t, nil))
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test", name)
	}
}
