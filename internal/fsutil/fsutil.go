// Package fsutil writes files so that a crash never leaves a torn one:
// hostd's leases, seeds, keys, identity and task records all go through it.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// Durability says how far a write is synced.
type Durability int

// Durability levels.
const (
	// Atomic survives a crash of the process: old or new content, never a
	// part.
	Atomic Durability = iota
	// Synced also syncs the file's data before the rename.
	Synced
	// Durable also syncs the directory, so the rename survives a power
	// loss.
	Durable
)

// WriteFile writes data to a temporary file beside name and renames it
// over name.
func WriteFile(name string, data []byte, perm os.FileMode, d Durability) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil && d >= Synced {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), name)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", name, werr)
	}
	if d < Durable {
		return nil
	}
	df, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer df.Close()
	if err := df.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
