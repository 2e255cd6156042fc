package devenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondDevVMIsRefused: while one dev --vm holds the machine's lock a
// second is refused, naming the holder's pid and data dir and what they
// would share; once the first ends, the lock is free again.
func TestSecondDevVMIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev-vm.lock")
	unlock, err := lockVM(path, "/data/first")
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockVM(path, "/data/second")
	if err == nil {
		t.Fatal("a second dev --vm took the lock")
	}
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()), "data dir /data/first", devSliceNetwork} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	unlock()
	unlock2, err := lockVM(path, "/data/second")
	if err != nil {
		t.Fatalf("the lock was not free after the first ended: %v", err)
	}
	unlock2()
}
