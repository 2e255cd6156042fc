package store

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// LatestVersion is the number of the newest migration this build carries.
func LatestVersion() (int, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	latest := 0
	for _, n := range names {
		num, _, _ := strings.Cut(strings.TrimPrefix(n, "migrations/"), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return 0, fmt.Errorf("migration %s: not numbered", n)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// CheckMigrated fails unless the database's schema is at LatestVersion or
// newer (a newer controld may have migrated it during a rolling upgrade).
func CheckMigrated(ctx context.Context, q Querier) error {
	latest, err := LatestVersion()
	if err != nil {
		return err
	}
	var v int
	if err := q.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	if v < latest {
		return fmt.Errorf("schema at version %d, this controld needs %d: migrations not applied", v, latest)
	}
	return nil
}
