package pgserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// newDataDir returns a fresh data directory path. t.TempDir() will not do as
// a parent when we are root: it is mode 0700, so postgres could not reach it.
func newDataDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(parent, "cluster")
}

func testConfig(t *testing.T, dataDir string) Config {
	return Config{
		DataDir: dataDir,
		Logger:  slog.New(slog.NewTextHandler(t.Output(), nil)),
		Settings: map[string]string{
			"fsync":              "off",
			"synchronous_commit": "off",
			"full_page_writes":   "off",
			"shared_buffers":     "16MB",
		},
	}
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	srv, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	return srv
}

func connect(t *testing.T, srv *Server) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), srv.ConnString("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, newDataDir(t))
	srv := startServer(t, cfg)
	conn := connect(t, srv)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')"); err != nil {
		t.Fatal(err)
	}
	var listen string
	if err := conn.QueryRow(t.Context(), "SHOW listen_addresses").Scan(&listen); err != nil {
		t.Fatal(err)
	}
	if listen != "" {
		t.Errorf("listen_addresses = %q; want empty (no TCP)", listen)
	}
	conn.Close(t.Context())

	if err := srv.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-srv.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := srv.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("Wait after Stop: %v", err)
	}

	srv = startServer(t, cfg)
	var got string
	if err := connect(t, srv).QueryRow(t.Context(), "SELECT v FROM kept").Scan(&got); err != nil {
		t.Fatalf("query after restart: %v", err)
	}
	if got != "still here" {
		t.Errorf("got %q; want %q", got, "still here")
	}
}

func TestAlreadyRunning(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, newDataDir(t))
	startServer(t, cfg)
	_, err := Start(t.Context(), cfg)
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Start: got %v; want ErrAlreadyRunning", err)
	}
}

func TestStaleLockFile(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, newDataDir(t))
	if err := startServer(t, cfg).Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// What a crash leaves: lock files naming a process that no longer exists,
	// or whose pid now belongs to another program (here, the test binary).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for name, pid := range map[string]int{"dead": dead.Process.Pid, "reused": os.Getpid()} {
		t.Run(name, func(t *testing.T) {
			pgdata := filepath.Join(cfg.DataDir, "pgdata")
			fi, err := os.Stat(pgdata)
			if err != nil {
				t.Fatal(err)
			}
			owner := fi.Sys().(*syscall.Stat_t)
			lock := fmt.Sprintf("%d\n%s\n", pid, pgdata)
			for _, path := range []string{filepath.Join(pgdata, "postmaster.pid"), socketLock(cfg.DataDir)} {
				if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(path, int(owner.Uid), int(owner.Gid)); err != nil {
					t.Fatal(err)
				}
			}
			srv := startServer(t, cfg)
			connect(t, srv)
			if err := srv.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUnexpectedExit(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testConfig(t, newDataDir(t)))
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Done():
	case <-time.After(time.Minute):
		t.Fatal("Done not closed after the server was killed")
	}
	if err := srv.Wait(); err == nil {
		t.Error("Wait after a crash: got nil; want the exit status")
	}
}

func TestEarlyExitQuotesLog(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, newDataDir(t))
	cfg.Settings["shared_buffers"] = "lots"
	_, err := Start(t.Context(), cfg)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("got %v; want ErrExited", err)
	}
	if !strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) {
		t.Errorf("error does not quote the log: %v", err)
	}
}

func TestNotInstalled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, newDataDir(t))
	cfg.BinDir = t.TempDir()
	_, err := Start(t.Context(), cfg)
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("got %v; want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("error lacks the install hint: %v", err)
	}
}

func TestDirNotReachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs postgres as another user")
	}
	t.Parallel()
	parent, err := os.MkdirTemp("", "pgserver-test-") // mode 0700, owned by root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	_, err = Start(t.Context(), testConfig(t, filepath.Join(parent, "cluster")))
	if !errors.Is(err, ErrDirNotReachable) {
		t.Fatalf("got %v; want ErrDirNotReachable", err)
	}
	if want := parent + " is mode 0700"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestCheckAndSetDefaults(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "no data dir", cfg: Config{}, wantErr: "DataDir is required"},
		{name: "socket path too long", cfg: Config{DataDir: "/tmp/" + strings.Repeat("x", 100)}, wantErr: "choose a shorter DataDir"},
		{name: "tcp", cfg: Config{DataDir: "/tmp/x", Settings: map[string]string{"listen_addresses": "*"}}, wantErr: "may not set listen_addresses"},
		{name: "ok", cfg: Config{DataDir: "/tmp/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.CheckAndSetDefaults()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v; want nil", err)
				}
				if tt.cfg.Superuser != "gpuaas" || tt.cfg.LogFile != "/tmp/x/postgres.log" || tt.cfg.Logger == nil {
					t.Errorf("defaults not set: %+v", tt.cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConnStringQuoting(t *testing.T) {
	srv := &Server{cfg: Config{DataDir: `/tmp/it's here`, Superuser: "gpuaas"}}
	cfg, err := pgx.ParseConfig(srv.ConnString(`my db\`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != `/tmp/it's here` || cfg.Database != `my db\` || cfg.User != "gpuaas" || cfg.Port != Port {
		t.Errorf("got host=%q db=%q user=%q port=%d", cfg.Host, cfg.Database, cfg.User, cfg.Port)
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"15", "9.6", 1},
		{"9.6", "10", -1},
		{"16", "16", 0},
	}
	for _, tt := range tests {
		got := compareVersions(tt.a, tt.b)
		if (got > 0) != (tt.want > 0) || (got < 0) != (tt.want < 0) {
			t.Errorf("compareVersions(%q, %q) = %d; want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}
