package sshconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddInclude(t *testing.T) {
	const target = "/home/ada/.config/gpuaas/ssh/dev/config"
	line := "Include " + target
	existing := "Host work\n    User ada\n"
	tests := []struct {
		name      string
		before    *string // nil: no file
		mode      os.FileMode
		wantAdded bool
		wantMode  os.FileMode
		want      string
	}{
		{name: "new file", wantAdded: true, wantMode: 0o600,
			want: "# Added by `gpuaas ssh-config --write`.\n" + line + "\n"},
		{name: "before the first Host", before: &existing, mode: 0o644, wantAdded: true, wantMode: 0o644,
			want: "# Added by `gpuaas ssh-config --write`.\n" + line + "\n\n" + existing},
		{name: "already there", before: ptr("Host x\n  include \"" + target + "\"\n"), mode: 0o600, wantMode: 0o600,
			want: "Host x\n  include \"" + target + "\"\n"},
		{name: "with =", before: ptr("Include=" + target + "\n"), mode: 0o600, wantMode: 0o600,
			want: "Include=" + target + "\n"},
		{name: "another Include", before: ptr("Include ~/.ssh/other\n"), mode: 0o600, wantAdded: true, wantMode: 0o600,
			want: "# Added by `gpuaas ssh-config --write`.\n" + line + "\n\nInclude ~/.ssh/other\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".ssh", "config")
			if tt.before != nil {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(*tt.before), tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			added, err := AddInclude(path, line, target)
			if err != nil || added != tt.wantAdded {
				t.Fatalf("got %v, %v; want added %v", added, err, tt.wantAdded)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if st, _ := os.Stat(path); st.Mode().Perm() != tt.wantMode {
				t.Errorf("got mode %o; want %o", st.Mode().Perm(), tt.wantMode)
			}
		})
	}
}

func TestAddIncludeFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "ssh_config")
	if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("Host x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := AddInclude(link, "Include /x", "/x"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v", err)
	}
	if got, _ := os.ReadFile(real); !strings.HasPrefix(string(got), "# Added") {
		t.Errorf("got %q; want the target edited", got)
	}
}

func ptr(s string) *string { return &s }
