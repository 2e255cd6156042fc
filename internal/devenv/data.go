package devenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/pgserver"
)

// prepareDataDir makes the data directory and the directories the
// platform keeps there private: 0700, whatever they were. With isolated
// sim users (systemUsers) the data directory and hosts/ are 0711 instead:
// the postgres account must pass through to pg/ (itself 0700, postgres's)
// and the sim users to their homes (hosts/<host>/sim/homes/<user>), but no
// one else may list them, and everything else in them is 0700 or 0600.
func prepareDataDir(dir string, systemUsers bool) error {
	top := os.FileMode(0o700)
	if systemUsers {
		top = 0o711
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, top}, {filepath.Join(dir, "hosts"), top}, {filepath.Join(dir, "nats"), 0o700}, {filepath.Join(dir, "sshgate"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// ensureDatabase creates the database on first start.
func ensureDatabase(ctx context.Context, pg *pgserver.Server, name string) error {
	conn, err := pgx.Connect(ctx, pg.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("connect postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// LogIsolation says how sessions on sim hosts run: as unprivileged users
// of their own (systemUsers), or as this process. `gpuaas hostd --sim`
// says it too.
func LogIsolation(log *slog.Logger, systemUsers bool) {
	if systemUsers {
		log.Info("sim hosts' sessions (bare metal and slice guests) run as unprivileged POSIX users of their own, removed when the sim stops")
		return
	}
	log.Warn("sim hosts' sessions are NOT isolated: not running as root, they run as this process's user and can read its data (run as root to isolate them)")
}
