package tasks_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBareMetalReleaseLeavesNothingForTheNextTenant is a bare-metal
// release on the sim run as root: tenant A leaves 0600 files in /tmp,
// /var/tmp and /dev/shm (from its session, whose are its own, and from a
// process that reached the node another way, whose are the node's), a
// System V segment in the node's IPC namespace and one in its session's,
// a crontab line and an at job. allocation.deprovision_user removes them
// all and counts them in its result; tenant B, on the same host next,
// has another uid and can read none of it.
func TestBareMetalReleaseLeavesNothingForTheNextTenant(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sim system users need root (useradd)")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "pkill", "pgrep", "getent", "ipcmk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-tasks-tenant-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHostWith(filepath.Join(parent, "state"), sim.H100Baremetal8(), "sim-metal", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	env := h.Env("n-test", testutil.Logger(t))
	ctx := context.Background()

	allocA, allocB := "a-ten"+strconv.Itoa(os.Getpid()), "a-tem"+strconv.Itoa(os.Getpid())
	a := provisionTenant(t, env, allocA)
	acct, err := h.Users.Accounts().Lookup(ctx, a.name)
	if err != nil || acct.Isolation == nil {
		t.Fatalf("A's account %+v, %v; want one its sessions are isolated in", acct, err)
	}
	inSession := func(script string) {
		t.Helper()
		cmd := exec.Command(acct.Shell, "-c", script)
		cmd.Dir, cmd.Env = acct.Home, []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: acct.Credential}
		if err := acct.Isolation.Isolate(cmd, acct.Credential, ""); err != nil {
			t.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	// Through a session: files in its private /tmp and /var/tmp, and a
	// segment held by a process that outlives the session.
	inSession("umask 077; echo secret > /tmp/s1; echo secret > /var/tmp/s2; ipcmk -M 4096 -p 0600 >/dev/null; nohup sleep 300 >/dev/null 2>&1 &")
	// Another way onto the node: the node's own /tmp, /var/tmp, /dev/shm
	// and IPC namespace.
	left := []string{"/tmp/left-" + a.name, "/var/tmp/left-" + a.name, "/dev/shm/left-" + a.name}
	a.run(t, "umask 077; for f in "+strings.Join(left, " ")+"; do echo secret > $f; done; ipcmk -M 4096 -p 0600 >/dev/null")
	crontab := spoolFile(t, "/var/spool/cron/crontabs", a.name, a.uid, "* * * * * cat /etc/shadow\n")
	atJob := spoolFile(t, "/var/spool/cron/atjobs", "a00042"+a.name, a.uid, "#!/bin/sh\nid\n")

	out, _, err := run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: allocA, PosixUser: a.name})
	if err != nil {
		t.Fatal(err)
	}
	// 3 files outside; 2 files and the two directories of the private
	// /tmp and /var/tmp. The session's segment went with its namespace.
	r := out.(hostproto.UserDeprovisionResult)
	if want := (api.UserRemoved{Files: 7, IPC: 1, Jobs: 2}); !r.Existed || r.Removed == nil || *r.Removed != want {
		t.Errorf("result %+v (removed %+v); want existed, removed %+v", r, r.Removed, want)
	}
	for _, p := range append(left, crontab, atJob) {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s outlived the release: %v", p, err)
		}
	}
	if b, _ := os.ReadFile("/proc/sysvipc/shm"); strings.Contains(string(b), " "+strconv.Itoa(a.uid)+" ") {
		t.Errorf("a segment of uid %d outlived the release:\n%s", a.uid, b)
	}

	b := provisionTenant(t, env, allocB)
	if b.uid == a.uid || b.gid == a.gid {
		t.Fatalf("B has uid %d gid %d; want ids A (%d, %d) never had", b.uid, b.gid, a.uid, a.gid)
	}
	paths := append(left, crontab, atJob, "/tmp/s1", "/var/tmp/s2")
	got := b.run(t, "for f in "+strings.Join(paths, " ")+"; do cat $f 2>&1; done; true")
	if strings.Contains(got, "secret") || strings.Contains(got, "shadow") || len(strings.Split(got, "\n")) != len(paths) {
		t.Errorf("B reading what A left:\n%s\nwant one refusal per file", got)
	}
}

// simTenant is a provisioned allocation user.
type simTenant struct {
	name     string
	uid, gid int
}

func provisionTenant(t *testing.T, env *tasks.Env, alloc string) simTenant {
	t.Helper()
	name := api.PosixUser(alloc)
	t.Cleanup(func() {
		_, _, _ = run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: alloc, PosixUser: name})
	})
	if _, _, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: name}); err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return simTenant{name: name, uid: uid, gid: gid}
}

// run runs script as the tenant, not isolated: a process that reached
// the node some other way than hostd's sessions.
func (s simTenant) run(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// spoolFile writes a job as crontab(1) or at(1) leaves it: the user's,
// 0600, in the spool.
func spoolFile(t *testing.T, dir, name string, uid int, content string) string {
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
