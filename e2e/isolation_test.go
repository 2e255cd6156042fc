package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBareMetalSessionIsolated: with `gpuaas dev` run as root, a renter's
// shell on a bare-metal sim allocation (real OpenSSH through the gateway)
// runs as an unprivileged POSIX user of its own (and so does a slice
// guest's). It cannot read hostd's
// state (node key, task records, terminal host key), the dev data
// directory (PostgreSQL, JetStream, the gateway's host key) or another
// allocation's home; scp and sftp write files the renter owns. Releasing
// an allocation ends its processes and removes its account and home, and
// stopping dev leaves no sim account behind.
func TestBareMetalSessionIsolated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("isolated sim users need `gpuaas dev` to run as root")
	}
	// The data directory outside /tmp, which sessions do not see (theirs
	// is their own): what is checked here is that permissions keep them
	// out of it.
	data, cfg := varLibDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	// Four hosts: two bare-metal ones, for two tenants.
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--hosts", "4")
	// The banner may be written just after dev answers.
	testutil.EventuallyWithin(t, 30*time.Second, "the banner to say sessions are isolated", func() bool {
		return strings.Contains(dev.stderr.String(), "sessions on sim hosts run as unprivileged users")
	})
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	var ids []string
	for range 2 {
		r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--wait", "--json", "id", "--jq", ".id")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
		}
		ids = append(ids, id)
	}
	mine, theirs := ids[0], ids[1]
	target := mine + "@localhost"
	home := simHome(t, data, api.PosixUser(mine))
	theirHome := simHome(t, data, api.PosixUser(theirs))

	out, code := openssh(t, "ssh", "-F", sshConfig, target, "id -u; id -un; pwd")
	fields := strings.Fields(out)
	if code != 0 || len(fields) != 3 {
		t.Fatalf("ssh id: exit %d %q", code, out)
	}
	uid, name, pwd := fields[0], fields[1], fields[2]
	if uid == "0" || name != api.PosixUser(mine) || pwd != home {
		t.Fatalf("session runs as uid %s (%s) in %s; want the unprivileged %s in %s", uid, name, pwd, api.PosixUser(mine), home)
	}

	// Each path exists, and the session is refused with EACCES.
	hosts, err := filepath.Glob(filepath.Join(data, "hosts", "*"))
	if err != nil || len(hosts) != 4 {
		t.Fatalf("hosts: %v %v", hosts, err)
	}
	var files, dirs []string
	for _, h := range hosts {
		files = append(files, filepath.Join(h, "identity.json"), filepath.Join(h, "terminal", "host_key"))
		dirs = append(dirs, h, filepath.Join(h, "tasks"), filepath.Join(h, "sim"), filepath.Join(h, "sim", "homes"))
	}
	files = append(files, filepath.Join(data, "pg", "postgres.log"), filepath.Join(data, "sshgate", "host_ed25519_key"),
		filepath.Join(theirHome, ".ssh", "authorized_keys"))
	dirs = append(dirs, data, filepath.Join(data, "hosts"), filepath.Join(data, "pg"), filepath.Join(data, "pg", "pgdata"),
		filepath.Join(data, "nats"), theirHome)
	var script strings.Builder
	for _, f := range files {
		mustExist(t, f)
		script.WriteString("cat " + f + " 2>&1; ")
	}
	for _, d := range dirs {
		mustExist(t, d)
		script.WriteString("ls " + d + " 2>&1; ")
	}
	out, _ = openssh(t, "ssh", "-F", sshConfig, target, script.String())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(files)+len(dirs) {
		t.Fatalf("got %q; want one refusal per path (%d)", out, len(files)+len(dirs))
	}
	for i, l := range lines {
		if !strings.Contains(l, "Permission denied") {
			t.Errorf("check %d: got %q; want Permission denied", i, l)
		}
	}
	// PostgreSQL's socket (it takes trust logins) is out of reach too.
	if _, err := exec.LookPath("psql"); err == nil {
		out, code = openssh(t, "ssh", "-F", sshConfig, target, "psql -h "+filepath.Join(data, "pg")+" -U gpuaas -c 'select 1' postgres 2>&1")
		if code == 0 || !strings.Contains(out, "Permission denied") {
			t.Errorf("psql from the session: exit %d %q; want Permission denied", code, out)
		}
	}

	// A slice guest's user is unprivileged on the sim host too.
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "2", "--wait", "--json", "id", "--jq", ".id")
	slice := strings.TrimSpace(r.stdout)
	if r.code != 0 || slice == "" {
		t.Fatalf("create slice: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	out, code = openssh(t, "ssh", "-F", sshConfig, slice+"@localhost", "id -u; cat "+files[0]+" 2>&1; ls "+data+" 2>&1; exit 0")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 || lines[0] == "0" ||
		strings.Count(out, "Permission denied") != 2 {
		t.Errorf("slice session: exit %d %q; want a non-zero uid and Permission denied twice", code, out)
	}

	// scp and sftp write files the renter owns.
	src := writeFile(t, tempDir(t, "gpuaas-e2e-up-"), "up.txt", "uploaded")
	if out, code := openssh(t, "scp", "-F", sshConfig, src, target+":by-scp.txt"); code != 0 {
		t.Fatalf("scp: exit %d %s", code, out)
	}
	batch := writeFile(t, filepath.Dir(src), "batch", "put "+src+" by-sftp.txt\n")
	if out, code := openssh(t, "sftp", "-q", "-F", sshConfig, "-b", batch, target); code != 0 {
		t.Fatalf("sftp: exit %d %s", code, out)
	}
	for _, f := range []string{"by-scp.txt", "by-sftp.txt"} {
		fi, err := os.Stat(filepath.Join(home, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); got != uid {
			t.Errorf("%s owned by uid %s; want the renter's %s", f, got, uid)
		}
	}

	// Releasing ends the renter's processes and removes account and home.
	if out, code := openssh(t, "ssh", "-F", sshConfig, target, "nohup sleep 600 >/dev/null 2>&1 &"); code != 0 {
		t.Fatalf("background job: exit %d %s", code, out)
	}
	if out, err := exec.Command("pgrep", "-u", uid).CombinedOutput(); err != nil {
		t.Fatalf("pgrep -u %s: %v %s; want the background job", uid, err, out)
	}
	if r := dev.gpuaas(t, "", "alloc", "release", mine, "--wait"); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
	if out, err := exec.Command("pgrep", "-u", uid).CombinedOutput(); err == nil {
		t.Errorf("processes of uid %s outlived the release: %s", uid, out)
	}
	if _, err := user.Lookup(api.PosixUser(mine)); err == nil {
		t.Error("the account outlived the release")
	}
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Errorf("home after release: %v; want it gone", err)
	}

	// Stopping dev removes the other account (its home stays, shut).
	dev.stop(t)
	if _, err := user.Lookup(api.PosixUser(theirs)); err == nil {
		t.Error("an account outlived `gpuaas dev`")
	}
}

// simHome finds the home of a bare-metal sim user on whichever sim host
// holds it.
func simHome(t *testing.T, data, posixUser string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(data, "hosts", "*", "sim", "homes", posixUser))
	if err != nil || len(m) != 1 {
		t.Fatalf("home of %s: %v %v", posixUser, m, err)
	}
	return m[0]
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// varLibDir is tempDir in /var/lib instead of /tmp.
func varLibDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/lib", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
