package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeDataDirIsDevDefault is the regression test of "README's XID
// path is wrong for root": the README's line that finds gpuaas dev's data
// directory, run by sh, gives defaultDataDir's answer as root and as
// another user (an `id` that says 1000), with and without XDG_DATA_HOME.
func TestReadmeDataDirIsDevDefault(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "D=") && strings.Contains(l, "gpuaas/dev") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("README has no D=... line finding gpuaas dev's data directory")
	}
	notRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(notRoot, "id"), []byte("#!/bin/sh\necho 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	tests := []struct {
		name, path, xdg, want string
	}{
		{"root", os.Getenv("PATH"), "", "/var/lib/gpuaas/dev"},
		{"user", notRoot + ":" + os.Getenv("PATH"), "", filepath.Join(home, ".local", "share", "gpuaas", "dev")},
		{"user with XDG_DATA_HOME", notRoot + ":" + os.Getenv("PATH"), "/x/data", "/x/data/gpuaas/dev"},
	}
	if os.Geteuid() != 0 {
		tests = tests[1:] // `id -u` is not 0 here
	} else if got, err := defaultDataDir(); err != nil || got != tests[0].want {
		t.Fatalf("defaultDataDir as root: %q, %v; want %q", got, err, tests[0].want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", line+"\necho \"$D\"")
			cmd.Env = []string{"PATH=" + tt.path, "HOME=" + home}
			if tt.xdg != "" {
				cmd.Env = append(cmd.Env, "XDG_DATA_HOME="+tt.xdg)
			}
			out, err := cmd.Output()
			if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
				t.Fatalf("README's line gives %q (%v); want %q", got, err, tt.want)
			}
		})
	}
}
