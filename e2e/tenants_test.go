package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBareMetalTenantLeavesNothing: with `gpuaas dev` run as root and real
// OpenSSH through the gateway, tenant A's 0600 files in /tmp, /var/tmp
// and /dev/shm and its System V segment are its sessions' own: tenant B,
// on the other bare-metal host at the same time, does not see them, nor
// does the node. Releasing A removes them (hostd logs the count); the
// next tenant on A's host, C, has another uid and finds nothing of A's.
func TestBareMetalTenantLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("isolated sim users need `gpuaas dev` to run as root")
	}
	for _, tool := range []string{"ipcmk", "pgrep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--hosts", "4") // two bare-metal hosts
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	create := func() string {
		t.Helper()
		r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--wait", "--json", "id", "--jq", ".id")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
		}
		return id
	}
	ssh := func(alloc, script string) string {
		t.Helper()
		out, code := openssh(t, "ssh", "-F", sshConfig, alloc+"@localhost", script)
		if code != 0 {
			t.Fatalf("ssh %s %q: exit %d %s", alloc, script, code, out)
		}
		return strings.TrimSpace(out)
	}
	a, b := create(), create()
	files := []string{"/tmp/left-" + a, "/var/tmp/left-" + a, "/dev/shm/left-" + a}
	uidA := ssh(a, "umask 077; for f in "+strings.Join(files, " ")+"; do echo secret > $f; done; "+
		"ipcmk -M 4096 -p 0600 >/dev/null; nohup sleep 600 >/dev/null 2>&1 & id -u")
	for _, f := range files {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s is in the node's namespace: %v", f, err)
		}
	}
	if got := ssh(a, "cat "+strings.Join(files[:2], " ")); got != "secret\nsecret" {
		t.Errorf("A's next session reading its /tmp and /var/tmp: %q", got)
	}
	if got := ssh(b, "cat "+strings.Join(files, " ")+" 2>&1; true"); strings.Count(got, "No such file or directory") != 3 {
		t.Errorf("B reading A's files while A runs:\n%s\nwant three misses", got)
	}
	homeA := simHome(t, data, api.PosixUser(a))
	hostA := filepath.Dir(filepath.Dir(filepath.Dir(homeA))) // hosts/<h>/sim/homes/<user>
	tenantDir := filepath.Join(hostA, "sim", "tenants", api.PosixUser(a))
	if _, err := os.Stat(filepath.Join(tenantDir, "tmp", filepath.Base(files[0]))); err != nil {
		t.Errorf("A's /tmp file is not in its allocation's directory: %v", err)
	}

	if r := dev.gpuaas(t, "", "alloc", "release", a, "--wait"); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
	if out, err := exec.Command("pgrep", "-u", uidA).CombinedOutput(); err == nil {
		t.Errorf("processes of uid %s outlived the release: %s", uidA, out)
	}
	if _, err := os.Lstat(tenantDir); !os.IsNotExist(err) {
		t.Errorf("A's private directories outlived the release: %v", err)
	}
	if b, _ := os.ReadFile("/proc/sysvipc/shm"); regexp.MustCompile(`\s` + uidA + `\s`).Match(b) {
		t.Errorf("a segment of uid %s outlived the release", uidA)
	}
	// 2 files, and A's private /tmp and /var/tmp (/dev/shm was its
	// session's own).
	released := regexp.MustCompile(`allocation user released.*user=` + api.PosixUser(a) + `.*files_removed=(\d+)`)
	testutil.EventuallyWithin(t, 30*time.Second, "hostd to log what the release removed", func() bool {
		m := released.FindStringSubmatch(dev.stderr.String())
		return m != nil && m[1] == "4"
	})

	c := create()
	if home := simHome(t, data, api.PosixUser(c)); !strings.HasPrefix(home, hostA+string(filepath.Separator)) {
		t.Fatalf("C is at %s; want A's host %s", home, hostA)
	}
	u, err := user.Lookup(api.PosixUser(c))
	if err != nil {
		t.Fatal(err)
	}
	if u.Uid == uidA {
		t.Fatalf("C has A's uid %s", uidA)
	}
	got := ssh(c, "id -u; cat "+strings.Join(files, " ")+" 2>&1; ls -A /tmp /var/tmp /dev/shm; true")
	if lines := strings.Split(got, "\n"); lines[0] != u.Uid || strings.Contains(got, "secret") ||
		strings.Count(got, "No such file or directory") != 3 {
		t.Errorf("C (uid %s) looking for A's files:\n%s", u.Uid, got)
	}
	if n, err := strconv.Atoi(uidA); err != nil || n == 0 {
		t.Errorf("A ran as uid %q", uidA)
	}
}
