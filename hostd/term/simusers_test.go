package term_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSimSystemUsersIsolate is the sim host of `gpuaas dev` run as root:
// a bare-metal session runs as the allocation's own unprivileged account,
// through the same terminal code as a real node, and cannot read hostd's
// state (node key, task records, terminal host key, users' records) nor
// another tenant's home; what it writes, over exec or sftp, is its own.
func TestSimSystemUsersIsolate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sim system users need root (useradd)")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	// hostd's state directory where a node keeps it: under directories
	// anyone may search (t.TempDir's are 0700), and not in /tmp, which
	// the sessions do not see (their /tmp is their own): what is checked
	// here is that permissions keep them out.
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-term-sim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(parent, "state")
	h, err := sim.NewHostWith(state, sim.H100Baremetal8(), "sim-metal", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	// What hostd keeps there, with the modes it writes them with.
	mustWrite(t, filepath.Join(state, "identity.json"), []byte(`{"seed":"secret"}`), 0o600)
	mustWrite(t, filepath.Join(state, "tasks", "t-1.json"), []byte(`{}`), 0o600)

	ctx := context.Background()
	alloc, other := randomAlloc(t), randomAlloc(t)
	for _, a := range []string{alloc, other} {
		if err := h.Users.Create(ctx, api.PosixUser(a), nil); err != nil {
			t.Fatal(err)
		}
	}
	otherHome := h.Users.Home(api.PosixUser(other))
	mustWrite(t, filepath.Join(otherHome, "private.txt"), []byte("other tenant"), 0o644)

	th := newHarnessIn(t, state, api.ShapeBaremetal, alloc, h.Users.Accounts())
	u, err := user.Lookup(th.user)
	if err != nil {
		t.Fatal(err)
	}
	c := th.client()

	run := func(cmd string) string {
		t.Helper()
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.CombinedOutput(cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	if got, want := run("id -u; id -un; whoami; pwd"), u.Uid+"\n"+th.user+"\n"+th.user+"\n"+u.HomeDir+"\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if u.Uid == "0" {
		t.Fatal("the session runs as root")
	}
	// A command without a login shell finds what a login shell would: the
	// simulated nvidia-smi in ~/.local/bin (it was "command not found").
	if out := run("nvidia-smi -L"); !strings.Contains(out, "GPU 0: ") {
		t.Errorf("nvidia-smi -L without a login shell: %q; want the GPUs listed", out)
	}

	// Each of these exists and is refused with EACCES, not missing.
	files := []string{
		filepath.Join(state, "identity.json"),
		filepath.Join(state, "tasks", "t-1.json"),
		filepath.Join(state, "terminal", "host_key"),
		filepath.Join(otherHome, "private.txt"),
	}
	dirs := []string{state, filepath.Join(state, "sim"), filepath.Join(state, "sim", "users"),
		filepath.Join(state, "sim", "homes"), filepath.Join(state, "tasks"), otherHome}
	var script strings.Builder
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
		script.WriteString("cat " + f + " 2>&1; ")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatal(err)
		}
		script.WriteString("ls " + d + " 2>&1; ")
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := s.CombinedOutput(script.String())
	s.Close()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(files)+len(dirs) {
		t.Fatalf("got %q; want one refusal per path", out)
	}
	for i, l := range lines {
		if !strings.Contains(l, "Permission denied") {
			t.Errorf("check %d: got %q; want Permission denied", i, l)
		}
	}

	// Files the session makes are the user's, over exec and over sftp.
	run("echo x > by-exec.txt")
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sc.Create("by-sftp.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("sftp"))
	_ = f.Close()
	_ = sc.Close()
	for _, name := range []string{"by-exec.txt", "by-sftp.txt"} {
		fi, err := os.Stat(filepath.Join(u.HomeDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); got != u.Uid {
			t.Errorf("%s owned by uid %s; want the user's %s", name, got, u.Uid)
		}
	}

	// Deprovisioning ends the user's processes and the account.
	run("nohup sleep 300 >/dev/null 2>&1 &")
	if err := h.Users.KillProcesses(ctx, th.user); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Users.Delete(ctx, th.user); err != nil {
		t.Fatal(err)
	}
	if _, err := (host.ExecRunner{}).Run(ctx, "pgrep", "-u", u.Uid); host.ExitCode(err) != 1 {
		t.Errorf("pgrep -u %s after deprovisioning: %v; want no process", u.Uid, err)
	}
	if _, err := user.Lookup(th.user); err == nil {
		t.Error("the account outlived its deprovisioning")
	}
}

// randomAlloc is an allocation id no other test run on the machine uses,
// whose account is removed at cleanup whatever the test did.
func randomAlloc(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	alloc := "a-t" + hex.EncodeToString(b[:])
	name := api.PosixUser(alloc)
	t.Cleanup(func() {
		if u, err := user.Lookup(name); err == nil && u.Name == sim.SystemUserComment {
			_, _ = host.ExecRunner{}.Run(context.Background(), "pkill", "-KILL", "-u", name)
			_, _ = host.ExecRunner{}.Run(context.Background(), "userdel", "--", name)
		}
	})
	return alloc
}
