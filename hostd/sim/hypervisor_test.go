package sim

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// guestKey makes a client key and its authorized_keys line.
func guestKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	s := sshtest.NewSigner(t)
	return s, sshtest.AuthorizedKey(s.PublicKey())
}

// seedDir writes a cloud-config user-data authorizing key for user and
// returns the seed ISO path beside it.
func seedDir(t *testing.T, user, key string) string {
	t.Helper()
	dir := t.TempDir()
	ud := "#cloud-config\nusers:\n  - default\n  - name: " + user + "\n    ssh_authorized_keys:\n      - " + key + "\n"
	if err := os.WriteFile(filepath.Join(dir, "user-data"), []byte(ud), 0o600); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(dir, "seed.iso")
	if err := os.WriteFile(iso, []byte("iso"), 0o600); err != nil {
		t.Fatal(err)
	}
	return iso
}

func testSpec(name, seed string, devs ...host.PCIAddress) host.DomainSpec {
	return host.DomainSpec{Name: name, VCPUs: 2, MemoryMiB: 1024, NUMANode: -1, SeedISO: seed, HostDevs: devs,
		Disks: []host.Disk{{Source: "/dev/disk/by-id/nvme-x", Target: "vdb", Raw: true}}}
}

// sshRun runs cmd in the guest at addr and returns its output (stdout,
// then stderr) and exit status.
func sshRun(t *testing.T, addr, user string, key gossh.Signer, cmd string) (string, int, error) {
	t.Helper()
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	out, stderr, status, err := sshtest.Run(t, c, cmd)
	if err != nil {
		return out + stderr, 0, err
	}
	return out + stderr, status, nil
}

func hostKeyOf(t *testing.T, addr, user string, key gossh.Signer) string {
	t.Helper()
	var got string
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: func(_ string, _ net.Addr, k gossh.PublicKey) error {
			got = string(k.Marshal())
			return nil
		}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return got
}

func TestHypervisorGuest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, err := NewHypervisor(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	key, line := guestKey(t)
	other, _ := guestKey(t)
	spec := testSpec("a-vm1", seedDir(t, "galice", line), "0000:18:00.0")
	if err := h.Define(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := h.Define(ctx, spec); !errors.Is(err, host.ErrDomainExists) {
		t.Errorf("second Define: got %v; want host.ErrDomainExists", err)
	}
	if st, _ := h.State(ctx, "a-vm1"); st != host.DomainShutoff {
		t.Errorf("state after Define = %s; want shutoff", st)
	}
	if _, err := h.Address(ctx, "a-vm1"); !errors.Is(err, host.ErrDomainNotRunning) {
		t.Errorf("Address of a shut-off domain: got %v; want host.ErrDomainNotRunning", err)
	}
	if err := h.Start(ctx, "a-vm1"); err != nil {
		t.Fatal(err)
	}
	addr, err := h.Address(ctx, "a-vm1")
	if err != nil {
		t.Fatal(err)
	}

	out, code, err := sshRun(t, addr, "galice", key, `echo "$HOME" > where; cat where; echo err >&2; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(h.Sandbox("a-vm1"), "galice")
	if code != 3 || out != home+"\nerr\n" {
		t.Errorf("exec = %q, exit %d; want %q, exit 3", out, code, home+"\nerr\n")
	}
	if _, err := os.Stat(filepath.Join(home, "where")); err != nil {
		t.Errorf("command did not run in the sandbox home: %v", err)
	}
	if _, _, err := sshRun(t, addr, "galice", other, "true"); err == nil {
		t.Error("a key not in user-data was let in")
	}
	if _, _, err := sshRun(t, addr, "root", key, "true"); err == nil {
		t.Error("the key was let in as another user")
	}

	// A second domain cannot take a device a running one holds.
	if err := h.Define(ctx, testSpec("a-vm2", "", "0000:18:00.0")); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, "a-vm2"); !errors.Is(err, host.ErrDeviceBusy) {
		t.Errorf("Start with a busy device: got %v; want host.ErrDeviceBusy", err)
	}

	if err := h.Undefine(ctx, "a-vm1"); !errors.Is(err, host.ErrDomainActive) {
		t.Errorf("Undefine of a running domain: got %v; want host.ErrDomainActive", err)
	}
	if err := h.Destroy(ctx, "a-vm1"); err != nil {
		t.Fatal(err)
	}
	if err := h.Destroy(ctx, "a-vm1"); err != nil {
		t.Errorf("Destroy of a shut-off domain: %v", err)
	}
	if _, _, err := sshRun(t, addr, "galice", key, "true"); err == nil {
		t.Error("the guest still answers after Destroy")
	}
	if err := h.Undefine(ctx, "a-vm1"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func(context.Context, string) error{h.Start, h.Shutdown, h.Destroy, h.Undefine} {
		if err := op(ctx, "a-vm1"); !errors.Is(err, host.ErrDomainNotFound) {
			t.Errorf("op on an undefined domain: got %v; want ErrDomainNotFound", err)
		}
	}
	if st, err := h.State(ctx, "a-vm1"); st != host.DomainNotFound || err != nil {
		t.Errorf("State of an undefined domain = %s, %v; want not_found", st, err)
	}
	if names, _ := h.List(ctx); len(names) != 1 || names[0] != "a-vm2" {
		t.Errorf("List = %v; want [a-vm2]", names)
	}
	if _, err := os.Stat(filepath.Join(dir, "hostkeys", "a-vm1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host key left after Undefine: %v", err)
	}
}

// A hypervisor reopened on the same directory, as after hostd was killed,
// finds its domains and restarts the running guests with the same host key.
func TestHypervisorRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, err := NewHypervisor(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, line := guestKey(t)
	seed := seedDir(t, "gbob", line)
	for _, n := range []string{"a-run", "a-off"} {
		if err := h.Define(ctx, testSpec(n, seed)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Start(ctx, "a-run"); err != nil {
		t.Fatal(err)
	}
	addr, _ := h.Address(ctx, "a-run")
	before := hostKeyOf(t, addr, "gbob", key)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.List(ctx); !errors.Is(err, host.ErrClosed) {
		t.Errorf("List after Close: got %v; want host.ErrClosed", err)
	}

	h2, err := NewHypervisor(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if st, _ := h2.State(ctx, "a-run"); st != host.DomainRunning {
		t.Errorf("a-run after restart is %s; want running", st)
	}
	if st, _ := h2.State(ctx, "a-off"); st != host.DomainShutoff {
		t.Errorf("a-off after restart is %s; want shutoff", st)
	}
	addr2, err := h2.Address(ctx, "a-run")
	if err != nil {
		t.Fatal(err)
	}
	if out, code, err := sshRun(t, addr2, "gbob", key, "echo up"); err != nil || code != 0 || out != "up\n" {
		t.Errorf("exec after restart = %q, %d, %v; want up", out, code, err)
	}
	if after := hostKeyOf(t, addr2, "gbob", key); after != before {
		t.Error("the guest's host key changed across the restart")
	}
}

func TestHypervisorShutdownDelay(t *testing.T) {
	ctx := context.Background()
	h, err := NewHypervisor(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Define(ctx, testSpec("a-slow", "")); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, "a-slow"); err != nil {
		t.Fatal(err)
	}
	h.SetShutdownDelay(50 * time.Millisecond)
	if err := h.Shutdown(ctx, "a-slow"); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.State(ctx, "a-slow"); st != host.DomainRunning {
		t.Errorf("state right after Shutdown = %s; want running until the delay passes", st)
	}
	testutil.EventuallyWithin(t, 5*time.Second, "the domain shut off after the shutdown delay", func() bool {
		st, _ := h.State(ctx, "a-slow")
		return st == host.DomainShutoff
	})
	if err := h.Shutdown(ctx, "a-slow"); err != nil {
		t.Errorf("Shutdown of a shut-off domain: %v", err)
	}
}

func TestHypervisorStartNeedsFiles(t *testing.T) {
	ctx := context.Background()
	h, err := NewHypervisor(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	spec := testSpec("a-nodisk", "")
	spec.Disks = append(spec.Disks, host.Disk{Source: filepath.Join(t.TempDir(), "gone.qcow2"), Target: "vda"})
	if err := h.Define(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, "a-nodisk"); err == nil {
		t.Error("Start with a missing overlay succeeded")
	}
	if err := h.Define(ctx, testSpec("bad/name", "")); !errors.Is(err, host.ErrInvalidSpec) {
		t.Errorf("Define with a slash in the name: got %v; want host.ErrInvalidSpec", err)
	}
}
