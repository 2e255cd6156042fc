package sim

import (
	"context"
	"errors"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestGuestSystemUsers: with system users, a sim guest's user is a POSIX
// account while the guest runs; its commands, terminal and sftp run as
// that account, which cannot read the hypervisor's state. Powering the
// guest off ends its processes and parks the account; booting it again
// brings the account back with its files; undefining the domain removes
// them.
func TestGuestSystemUsers(t *testing.T) {
	needSystemUsers(t)
	ctx := context.Background()
	root := searchableDir(t)
	users, err := NewSystemUsers(ctx, filepath.Join(root, "users"), filepath.Join(root, "homes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = users.Close() })
	h, err := newHypervisor(filepath.Join(root, "hypervisor"), users, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	name := randomUser(t)
	key, line := guestKey(t)
	if err := h.Define(ctx, testSpec("a-vmsys", seedDir(t, name, line))); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, "a-vmsys"); err != nil {
		t.Fatal(err)
	}
	home := h.GuestHome("a-vmsys", name)
	if home != users.Home(name) {
		t.Fatalf("GuestHome = %s; want the system user's %s", home, users.Home(name))
	}
	dial := func() *gossh.Client {
		t.Helper()
		addr, err := h.Address(ctx, "a-vmsys")
		if err != nil {
			t.Fatal(err)
		}
		c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: name, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := dial()
	run := func(cmd string) string {
		t.Helper()
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, _ := s.CombinedOutput(cmd)
		return string(out)
	}
	uid, _ := lookupIDs(t, name)
	if got, want := run("id -u; id -un; pwd"), strconv.Itoa(int(uid))+"\n"+name+"\n"+home+"\n"; got != want || uid == 0 {
		t.Errorf("got %q; want %q", got, want)
	}
	hostKey := filepath.Join(root, "hypervisor", "hostkeys", "a-vmsys")
	if _, err := os.Stat(hostKey); err != nil {
		t.Fatal(err)
	}
	if got := run("cat " + hostKey + " 2>&1; ls " + filepath.Join(root, "hypervisor") + " 2>&1"); strings.Count(got, "Permission denied") != 2 {
		t.Errorf("reading the hypervisor's state: %q; want Permission denied twice", got)
	}

	// The terminal is the user's.
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "echo \"tty-owner=$(stat -c %U $(tty))\"; exit\n")
	sshtest.ReadUntil(t, stdout, "tty-owner="+name)
	_ = s.Close()

	// sftp runs as the user.
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sc.Create("disk.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("on the guest's disk"))
	_ = f.Close()
	_ = sc.Close()
	file := filepath.Join(home, "disk.txt")
	if got, _, _ := owner(t, file); got != uid {
		t.Errorf("sftp wrote a file owned by %d; want the user's %d", got, uid)
	}

	// Off: no account, no processes; the home is shut.
	run("nohup sleep 300 >/dev/null 2>&1 &")
	if err := h.Destroy(ctx, "a-vmsys"); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Lookup(name); err == nil {
		t.Error("the guest's account exists while it is off")
	}
	if out, err := (host.ExecRunner{}).Run(ctx, "pgrep", "-u", strconv.Itoa(int(uid))); host.ExitCode(err) != 1 {
		t.Errorf("processes of the guest's user outlived it: %v %s", err, out)
	}
	if got, _, mode := owner(t, home); got != 0 || mode != 0o700 {
		t.Errorf("home of a guest that is off: owner %d mode %04o; want root 0700", got, mode)
	}
	// On again: the account and its file are back.
	if err := h.Start(ctx, "a-vmsys"); err != nil {
		t.Fatal(err)
	}
	c = dial()
	uid, _ = lookupIDs(t, name)
	if got := run("cat disk.txt; id -u"); got != "on the guest's disk"+strconv.Itoa(int(uid))+"\n" {
		t.Errorf("after a reboot: %q", got)
	}

	if err := h.Destroy(ctx, "a-vmsys"); err != nil {
		t.Fatal(err)
	}
	if err := h.Undefine(ctx, "a-vmsys"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("home after undefine: %v; want it gone", err)
	}
	if _, err := user.Lookup(name); err == nil {
		t.Error("the guest's account outlived its domain")
	}
}
