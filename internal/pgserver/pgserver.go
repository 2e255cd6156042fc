// Package pgserver runs a private PostgreSQL cluster as a child process: its
// own data directory, its Unix socket inside that directory and no TCP
// listener at all. `gpuaas dev` keeps its database in one; internal/testutil
// starts one per test binary.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Port is the port number in the socket's name (.s.PGSQL.5432). The server
// opens no TCP port: the socket directory alone tells clusters apart.
const Port = 5432

const (
	defaultSuperuser    = "gpuaas"
	defaultStartTimeout = time.Minute
	// fastShutdownTimeout bounds Stop's wait after SIGINT when its context has no deadline.
	fastShutdownTimeout      = 30 * time.Second
	immediateShutdownTimeout = 10 * time.Second
	// maxSocketPath is the longest socket path every Unix accepts (macOS's sun_path is 104 bytes with the NUL).
	maxSocketPath = 103
)

// fixedSettings are chosen by Start; Config.Settings may not change them.
var fixedSettings = []string{"listen_addresses", "unix_socket_directories", "port"}

// Config says where a cluster lives and how to run it.
type Config struct {
	// DataDir holds the cluster (in DataDir/pgdata), the Unix socket and, by
	// default, the log file. It is created if missing. Required.
	DataDir string
	// BinDir holds initdb and postgres. Empty: the directory `pg_config
	// --bindir` names, else the newest /usr/lib/postgresql/*/bin, else PATH.
	BinDir string
	// Logger receives progress messages. Default: slog.Default().
	Logger *slog.Logger
	// Settings are server settings passed as -c name=value, over the defaults
	// max_connections=200, shared_buffers=128MB and unix_socket_permissions=0700
	// (only the server's OS user, and root, may connect). Tests add fsync=off,
	// synchronous_commit=off and full_page_writes=off.
	Settings map[string]string
	// Superuser is the role initdb creates and ConnString connects as. Default: "gpuaas".
	Superuser string
	// LogFile receives the output of initdb and postgres. Default: DataDir/postgres.log.
	LogFile string
	// StartTimeout bounds Start's wait for the server to accept connections. Default: one minute.
	StartTimeout time.Duration
}

// CheckAndSetDefaults fails if DataDir is missing or would make too long a
// socket path, or if Settings tries to change the listening addresses; it
// makes DataDir absolute and fills in the defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.DataDir == "" {
		return errors.New("pgserver: DataDir is required")
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("pgserver: data directory: %w", err)
	}
	c.DataDir = dir
	if sock := filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", Port)); len(sock) > maxSocketPath {
		return fmt.Errorf("pgserver: socket path %s is %d bytes, more than the %d allowed: choose a shorter DataDir",
			sock, len(sock), maxSocketPath)
	}
	for _, name := range fixedSettings {
		if _, ok := c.Settings[name]; ok {
			return fmt.Errorf("pgserver: Settings may not set %s: the server listens only on its socket in DataDir", name)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Superuser == "" {
		c.Superuser = defaultSuperuser
	}
	if c.LogFile == "" {
		c.LogFile = filepath.Join(dir, "postgres.log")
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = defaultStartTimeout
	}
	return nil
}

// Server is a running postgres child process.
type Server struct {
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{}
	// exitErr is set before done is closed.
	exitErr error
	// stopping is set once Stop has asked the server to exit.
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// Start runs the cluster in cfg.DataDir, creating it with initdb the first
// time, and returns once it accepts connections. A cluster left behind by a
// crash is reused; one still served by a live postmaster makes Start fail with
// ErrAlreadyRunning. As root, initdb and postgres run as the postgres OS user.
// The server is a child of this process and shuts down if it dies (on Linux).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	binDir, err := findBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	owner, err := serviceAccount()
	if err != nil {
		return nil, err
	}
	pgdata := filepath.Join(cfg.DataDir, "pgdata")
	if err := prepareDataDir(cfg.DataDir, pgdata, owner); err != nil {
		return nil, err
	}
	logFile, err := openLog(cfg.LogFile, owner)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the children have their own copies
	// Error messages quote the log, but only what this Start wrote to it.
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}

	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		cfg.Logger.Info("creating PostgreSQL cluster", "dir", pgdata)
		if err := initdb(ctx, cfg, binDir, pgdata, logFile, owner); err != nil {
			return nil, fmt.Errorf("initdb: %w\n%s", err, logTail(cfg.LogFile, logStart))
		}
	} else if err != nil {
		return nil, fmt.Errorf("check cluster: %w", err)
	}
	for _, lock := range []string{filepath.Join(pgdata, "postmaster.pid"), socketLock(cfg.DataDir)} {
		if err := waitLockFree(ctx, lock, cfg.Logger); err != nil {
			return nil, err
		}
	}

	cmd := exec.Command(filepath.Join(binDir, "postgres"), serverArgs(cfg, pgdata)...)
	cmd.Dir = cfg.DataDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(owner.credential())
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{cfg: cfg, cmd: cmd, done: make(chan struct{})}
	go func() {
		s.exitErr = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx, logStart); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	cfg.Logger.Info("PostgreSQL ready", "socket_dir", cfg.DataDir, "pid", cmd.Process.Pid)
	return s, nil
}

func initdb(ctx context.Context, cfg Config, binDir, pgdata string, log *os.File, owner *account) error {
	args := []string{"-D", pgdata, "-A", "trust", "-U", cfg.Superuser, "-E", "UTF8", "--no-locale"}
	if cfg.Settings["fsync"] == "off" {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = cfg.DataDir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr(owner.credential())
	return cmd.Run()
}

// serverArgs returns postgres's command line: the settings in a stable order.
func serverArgs(cfg Config, pgdata string) []string {
	settings := map[string]string{
		"max_connections":         "200",
		"shared_buffers":          "128MB",
		"unix_socket_permissions": "0700",
	}
	maps.Copy(settings, cfg.Settings)
	settings["listen_addresses"] = ""
	args := []string{"-D", pgdata, "-k", cfg.DataDir, "-p", strconv.Itoa(Port)}
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", name+"="+settings[name])
	}
	return args
}

// waitReady polls until the server accepts a connection, exits, or the
// start timeout passes.
func (s *Server) waitReady(ctx context.Context, logStart int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	connCfg, err := pgx.ParseConfig(s.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("parse connection string: %w", err)
	}
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		conn, err := pgx.ConnectConfig(ctx, connCfg)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.done:
			return fmt.Errorf("%w: %v\n%s", ErrExited, s.exitErr, logTail(s.cfg.LogFile, logStart))
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres to accept connections: %w (last attempt: %v)\n%s",
				ctx.Err(), err, logTail(s.cfg.LogFile, logStart))
		case <-time.After(delay):
		}
	}
}

// ConnString returns a connection string (libpq keyword/value form, which pgx
// reads too) for database db over the server's Unix socket.
func (s *Server) ConnString(db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		quoteValue(s.cfg.DataDir), Port, quoteValue(s.cfg.Superuser), quoteValue(db))
}

// quoteValue quotes v for a keyword/value connection string when it needs it.
func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// SocketDir returns the directory holding the server's Unix socket, the
// "host" of its connection strings.
func (s *Server) SocketDir() string { return s.cfg.DataDir }

// Done is closed when the server process has exited, whether Stop asked it
// to or not.
func (s *Server) Done() <-chan struct{} { return s.done }

// Wait blocks until the server process has exited. It returns nil if Stop
// asked it to exit, and otherwise how it exited (see the log file for why).
func (s *Server) Wait() error {
	<-s.done
	if s.stopping.Load() {
		return nil
	}
	return s.exitErr
}

// Stop shuts the server down with a fast shutdown (SIGINT: sessions are ended
// and their transactions rolled back, then a checkpoint is written). If that
// has not finished when ctx is done, or after 30 seconds if ctx has no
// deadline, it falls back to an immediate shutdown (SIGQUIT; the next start
// recovers from the WAL) and returns an error saying so. Stop may be called
// more than once, also concurrently; every call returns the first one's result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Server) stop(ctx context.Context) error {
	select {
	case <-s.done:
		return nil // it had exited already; Wait reports how
	default:
	}
	s.stopping.Store(true)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fastShutdownTimeout)
		defer cancel()
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
	}
	s.cfg.Logger.Warn("PostgreSQL fast shutdown timed out; shutting down immediately", "pid", s.cmd.Process.Pid)
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(immediateShutdownTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return fmt.Errorf("stop postgres: fast shutdown did not finish (%w); used immediate shutdown", ctx.Err())
}
