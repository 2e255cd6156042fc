package mountinfo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadSelf: this process's own table has a root mount and a mount at
// /proc of the device DeviceOf names for /proc; a table that cannot be
// opened and a path that does not exist are errors.
func TestReadSelf(t *testing.T) {
	ms, err := Read("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if len(At(ms, "/")) == 0 {
		t.Fatalf("no mount at / among %d", len(ms))
	}
	dev, err := DeviceOf("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	at := At(ms, "/proc")
	if len(at) == 0 || at[len(at)-1].Device != dev {
		t.Fatalf("mounts at /proc %+v; want the last of device %s", at, dev)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a missing file: %v; want not exist", err)
	}
	if _, err := DeviceOf(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DeviceOf a missing path: %v; want not exist", err)
	}
}
