package host_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// needRoot skips unless the test can make accounts and mount.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "pkill", "ipcmk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
}

// tenant is an allocation user made for a test.
type tenant struct {
	name     string
	uid, gid int
	cred     *syscall.Credential
}

// newTenancy is a Tenancy whose directory others may pass through (as
// /var/tmp's is), its uids recorded in the test's own record.
func newTenancy(t *testing.T) *host.Tenancy {
	t.Helper()
	parent, err := os.MkdirTemp("", "gpuaas-tenancy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	return &host.Tenancy{Dir: filepath.Join(parent, "tenants"),
		UIDs: &host.UIDRange{Path: filepath.Join(t.TempDir(), "uids"), First: host.DefaultUIDFirst, Last: host.DefaultUIDLast}}
}

func newTenant(t *testing.T, u host.PosixUsers) tenant {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "gt" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = u.Delete(context.Background(), name) })
	if err := u.Create(context.Background(), name, nil); err != nil {
		t.Fatal(err)
	}
	usr, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(usr.Uid)
	gid, _ := strconv.Atoi(usr.Gid)
	return tenant{name: name, uid: uid, gid: gid, cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}

// sh runs script as the tenant: isolated as its sessions are when iso is
// not nil, else as a process that reached the node some other way.
func (tn tenant) sh(t *testing.T, iso *host.Isolation, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: tn.cred}
	if iso != nil {
		if err := iso.Isolate(cmd, tn.cred, ""); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// ipcOf lists the lines of /proc/sysvipc/<kind> (this namespace's) whose
// owner is uid.
func ipcOf(t *testing.T, kind string, uid int) []string {
	t.Helper()
	f, err := os.Open("/proc/sysvipc/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	head := strings.Fields(sc.Text())
	col := -1
	for i, h := range head {
		if h == "uid" {
			col = i
		}
	}
	var out []string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > col && f[col] == strconv.Itoa(uid) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// TestIsolatedSessionsHavePrivateTmp: a process hostd starts as a tenant
// sees its allocation's own /tmp and /var/tmp (shared by its sessions,
// the user's, 0700) and a /dev/shm and IPC namespace of its own session;
// the node's /tmp, and another tenant's session, see none of it; its OOM
// score is raised and it cannot lower it.
func TestIsolatedSessionsHavePrivateTmp(t *testing.T) {
	needRoot(t)
	ty := newTenancy(t)
	u := host.PosixUsers{Tenancy: ty, KillWait: 200 * time.Millisecond}
	a, b := newTenant(t, u), newTenant(t, u)
	isoA, err := ty.Session(a.name, a.uid, a.gid)
	if err != nil {
		t.Fatal(err)
	}
	isoB, err := ty.Session(b.name, b.uid, b.gid)
	if err != nil {
		t.Fatal(err)
	}
	secret := "secret-" + a.name
	a.sh(t, isoA, "umask 077; for d in /tmp /var/tmp /dev/shm; do echo a > $d/"+secret+"; done; ipcmk -M 4096 -p 0600 >/dev/null")
	for _, p := range []string{"/tmp/" + secret, "/var/tmp/" + secret, "/dev/shm/" + secret} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is on the node: %v; want it only in the session's namespace", p, err)
		}
	}
	if got := ipcOf(t, "shm", a.uid); len(got) != 0 {
		t.Errorf("the session's segment is in the node's IPC namespace: %q", got)
	}
	for _, p := range []string{filepath.Join(isoA.Tmp, secret), filepath.Join(isoA.VarTmp, secret)} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("%s: %v; want the session's file in the allocation's directory", p, err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != a.uid || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: owner %d mode %v", p, st.Uid, fi.Mode().Perm())
		}
	}

	// Another session of A shares /tmp and /var/tmp, not /dev/shm.
	got := a.sh(t, isoA, "cat /tmp/"+secret+" /var/tmp/"+secret+"; ls -A /dev/shm | wc -l; stat -c '%u %a' /tmp /dev/shm; cat /proc/self/oom_score_adj; echo -1000 > /proc/self/oom_score_adj 2>/dev/null || echo refused; grep '^Max processes' /proc/self/limits | awk '{print $3}'")
	want := strings.Join([]string{"a", "a", "0", strconv.Itoa(a.uid) + " 700", strconv.Itoa(a.uid) + " 700", "800", "refused",
		strconv.FormatUint(isoA.MaxProcs, 10)}, "\n")
	if isoA.MaxProcs == 0 {
		t.Error("no process limit")
	}
	if got != want {
		t.Errorf("second session of A:\n%s\nwant\n%s", got, want)
	}
	// B sees none of A's.
	got = b.sh(t, isoB, "ls /tmp/"+secret+" /var/tmp/"+secret+" /dev/shm/"+secret+" 2>&1 | grep -c 'No such file'; ls -A /tmp | wc -l")
	if got != "3\n0" {
		t.Errorf("B looking for A's files: got %q; want 3 misses and an empty /tmp", got)
	}
}

// TestReleaseLeavesNothing: files a tenant left anywhere on the node
// (0600, in /tmp, /var/tmp, /dev/shm, through a session or not), its
// System V segment, its crontab and at job are all gone after Delete,
// which counts them; the next tenant gets another uid and finds nothing.
func TestReleaseLeavesNothing(t *testing.T) {
	needRoot(t)
	ty := newTenancy(t)
	u := host.PosixUsers{Tenancy: ty, KillWait: 200 * time.Millisecond}
	a := newTenant(t, u)
	iso, err := ty.Session(a.name, a.uid, a.gid)
	if err != nil {
		t.Fatal(err)
	}
	// Outside any session (a path the platform does not start), as in
	// a session.
	left := []string{"/tmp/left-" + a.name, "/var/tmp/left-" + a.name, "/dev/shm/left-" + a.name,
		"/tmp/dir-" + a.name + "/nested"}
	a.sh(t, nil, "umask 077; for f in "+strings.Join(left[:3], " ")+"; do echo secret > $f; done; "+
		"mkdir -p /tmp/dir-"+a.name+" && echo secret > /tmp/dir-"+a.name+"/nested; ipcmk -M 4096 -p 0600 >/dev/null; ipcmk -Q -p 0600 >/dev/null")
	a.sh(t, iso, "umask 077; echo secret > /tmp/in-session; echo secret > /var/tmp/in-session")
	crontab := cronFile(t, "/var/spool/cron/crontabs", a.name, a.uid, "* * * * * cat /etc/shadow\n")
	atJob := cronFile(t, "/var/spool/cron/atjobs", "a0001f01c2b3d4", a.uid, "#!/bin/sh\nid\n")
	if n := len(ipcOf(t, "shm", a.uid)) + len(ipcOf(t, "msg", a.uid)); n != 2 {
		t.Fatalf("%d IPC objects of the tenant before the release; want 2", n)
	}

	removed, err := u.Delete(context.Background(), a.name)
	if err != nil {
		t.Fatal(err)
	}
	// 4 files and a directory left outside, 2 files in the private
	// directories and those two directories.
	if want := (host.Removed{Files: 9, IPC: 2, Jobs: 2}); removed != want {
		t.Errorf("removed %+v; want %+v", removed, want)
	}
	for _, p := range append(left, "/tmp/dir-"+a.name, crontab, atJob, filepath.Join(ty.Dir, a.name)) {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s outlived the release: %v", p, err)
		}
	}
	for _, kind := range []string{"shm", "msg", "sem"} {
		if got := ipcOf(t, kind, a.uid); len(got) != 0 {
			t.Errorf("%s objects outlived the release: %q", kind, got)
		}
	}

	b := newTenant(t, u)
	if b.uid == a.uid || b.gid == a.gid {
		t.Fatalf("the next tenant got uid %d gid %d; want ids the former tenant (%d, %d) never had", b.uid, b.gid, a.uid, a.gid)
	}
	paths := append(left, crontab, atJob)
	got := b.sh(t, nil, "for f in "+strings.Join(paths, " ")+"; do cat $f 2>&1; done; true")
	lines := strings.Split(got, "\n")
	if len(lines) != len(paths) || strings.Contains(got, "secret") || strings.Contains(got, "shadow") {
		t.Errorf("the next tenant reading what the former left:\n%s\nwant one refusal per file", got)
	}
}

// cronFile writes a job file as cron's crontab(1) or at(1) leave it: the
// user's, 0600, in the spool.
func cronFile(t *testing.T, dir, name string, uid int, content string) string {
	t.Helper()
	// A spool made here stays (empty, root's): tests of other packages,
	// run at the same time, may be using it.
	if err := os.MkdirAll(dir, 0o730); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(p) })
	if err := os.Chown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCreateRefusedWhenUIDsExhausted: with every uid of the range given,
// provisioning fails with ErrUIDsExhausted and makes no account or group,
// rather than give a uid a second time.
func TestCreateRefusedWhenUIDsExhausted(t *testing.T) {
	needRoot(t)
	rec := filepath.Join(t.TempDir(), "uids")
	r := &host.UIDRange{Path: rec, First: 799_999_980, Last: 799_999_980}
	if _, err := r.Next("earlier-tenant"); err != nil {
		t.Fatal(err)
	}
	u := host.PosixUsers{Tenancy: &host.Tenancy{UIDs: r}}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "gt" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = u.Delete(context.Background(), name) })
	err := u.Create(context.Background(), name, nil)
	if !errors.Is(err, host.ErrUIDsExhausted) || !strings.Contains(err.Error(), "799999980-799999980") {
		t.Fatalf("Create: got %v; want ErrUIDsExhausted naming the range", err)
	}
	if _, err := user.Lookup(name); err == nil {
		t.Error("an account was made")
	}
	if _, err := user.LookupGroup(name); err == nil {
		t.Error("a group was made")
	}
}
