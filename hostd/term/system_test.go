package term_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/sftp"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestSystemAccount serves a real POSIX user made with useradd, as on a
// bare-metal node: the session runs as that user (uid, groups, home, login
// shell) and its terminal belongs to them. It needs root.
func TestSystemAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	alloc := "a-t" + hex.EncodeToString(b[:])
	users := host.PosixUsers{}
	ctx := context.Background()
	name := api.PosixUser(alloc)
	t.Cleanup(func() {
		_ = users.KillProcesses(context.Background(), name)
		_, _ = users.Delete(context.Background(), name)
	})
	if err := users.Create(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}

	h := newHarnessFor(t, api.ShapeBaremetal, alloc, term.SystemAccounts{})
	c := h.client()

	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output(`id -un; id -u; pwd; echo "$HOME|$USER|$SHELL"; exit 7`)
	s.Close()
	if got := sshtest.ExitStatus(t, err); got != 7 {
		t.Errorf("got exit status %d; want 7", got)
	}
	want := name + "\n" + u.Uid + "\n" + u.HomeDir + "\n" + u.HomeDir + "|" + name + "|/bin/bash\n"
	if string(out) != want {
		t.Errorf("got %q; want %q", out, want)
	}

	// A login shell on a terminal owned by the user.
	s, err = c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "echo \"owner=$(stat -c %U $(tty)) login=$0\"; exit\n")
	sshtest.ReadUntil(t, bufio.NewReader(stdout), "owner="+name+" login=-bash")
	if err := s.Wait(); err != nil {
		t.Errorf("shell: %v", err)
	}

	// sftp runs the system's sftp-server as the user, when installed.
	sc, err := sftp.NewClient(c)
	if errors.Is(err, io.EOF) || (err != nil && strings.Contains(err.Error(), "subsystem request failed")) {
		t.Log("no sftp-server installed: sftp for real accounts not tested")
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f, err := sc.Create("real.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("as the user"))
	_ = f.Close()
	fi, err := os.Stat(filepath.Join(u.HomeDir, "real.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); got != u.Uid {
		t.Errorf("got the file owned by uid %s; want the user's %s", got, u.Uid)
	}
}

func TestSystemAccountsRefuseRoot(t *testing.T) {
	_, err := term.SystemAccounts{}.Lookup(context.Background(), "root")
	if !errors.Is(err, term.ErrNoAccount) {
		t.Errorf("got %v; want ErrNoAccount for root", err)
	}
	_, err = term.SystemAccounts{}.Lookup(context.Background(), "gnosuchuser42")
	if !errors.Is(err, term.ErrNoAccount) {
		t.Errorf("got %v; want ErrNoAccount for a missing user", err)
	}
}
