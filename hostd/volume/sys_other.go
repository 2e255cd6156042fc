//go:build !linux

package volume

import (
	"errors"
	"fmt"
	"os"
)

// allocate is fallocate(2): Linux only, as volumes are.
func allocate(*os.File, int64, int64) error {
	return fmt.Errorf("allocate a volume image: %w", errors.ErrUnsupported)
}

// fsSpace is statfs(2) on Linux; volumes live on Linux nodes only.
func fsSpace(string) (used, avail int64, err error) {
	return 0, 0, fmt.Errorf("filesystem space: %w", errors.ErrUnsupported)
}

// blockDevNumber finds no device numbers off Linux.
func blockDevNumber(string) string { return "" }

// deviceMapper is Linux's.
func deviceMapper() error {
	return fmt.Errorf("logical volumes: %w", errors.ErrUnsupported)
}
