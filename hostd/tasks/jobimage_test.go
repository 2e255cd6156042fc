package tasks_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/registry"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// tinyJobImage pushes an image like `gpuaas dev`'s stock one (busybox's
// shell and applets, /etc/os-release's ID gpuaas-tiny) and returns its
// digest reference.
func tinyJobImage(t *testing.T) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no busybox-static: %v", err)
	}
	files := map[string]string{"etc/os-release": "ID=gpuaas-tiny\n"}
	for _, a := range []string{"sh", "cat", "sleep", "pwd", "ls"} {
		files["bin/"+a] = string(bb)
	}
	img, err := registry.Tiny(files)
	if err != nil {
		t.Fatal(err)
	}
	srv := workloadtest.Registry(t)
	c, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.Push(context.Background(), "test/tiny", img)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestJobInImage runs a job's setup and run in a container of its image,
// as the renter: run sees /etc/os-release of the image, what setup wrote
// in the container, its env, and the workdir a job without an image
// made in the home; its own exit code is reported; the container is gone
// when it ended.
func TestJobInImage(t *testing.T) {
	_, env := podmanHost(t)
	ref := tinyJobImage(t)
	alloc := "a-jim" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	user := api.PosixUser(alloc)
	start := func(p hostproto.JobStartParams) hostproto.JobReport {
		t.Helper()
		p.AllocationID, p.PosixUser, p.Wait = alloc, user, 5*time.Minute
		out, _, err := run(t, env, api.TaskJobStart, p)
		return jobReport(t, out, err)
	}
	if r := start(hostproto.JobStartParams{JobID: "j-mkwd", Run: "mkdir -p ~/wd && echo from-the-home > ~/wd/f"}); r.ExitCode != 0 {
		t.Fatalf("making the workdir: %+v", r)
	}
	r := start(hostproto.JobStartParams{JobID: "j-img", Image: ref, Workdir: "wd", Env: []string{"GREETING=hello there"},
		Setup: "echo from-setup > /setup-was-here",
		Run:   `cat /etc/os-release; cat /setup-was-here; cat f; echo "greeting=$GREETING"; exit 7`})
	if !r.Ended || r.ExitCode != 7 || r.Phase != api.JobPhaseRun || r.Signal != "" {
		t.Fatalf("got %+v; want ended in run with 7", r)
	}
	for _, want := range []string{"ID=gpuaas-tiny\n", "from-setup\n", "from-the-home\n", "greeting=hello there\n"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("output %q; want it to hold %q", r.Output, want)
		}
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Errorf("containers after the job: %q; want none", names)
	}
}

// TestJobInImageCancel: job.stop ends a job in an image with SIGTERM to
// its processes; its secret value is in no container configuration nor
// any command line while it runs; no container remains.
func TestJobInImageCancel(t *testing.T) {
	_, env := podmanHost(t)
	ref := tinyJobImage(t)
	alloc := "a-jic" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	user := api.PosixUser(alloc)
	const secret = "s3cr3t-value-" + "4242"
	p := hostproto.JobStartParams{JobID: "j-imgstop", AllocationID: alloc, PosixUser: user, Wait: 0, Image: ref,
		Env: []string{"TOKEN=" + secret}, Run: `trap 'echo got-term; exit 9' TERM; echo "token=${#TOKEN}"; : > ~/running; while :; do sleep 1; done`}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	// Running: its container is there, in the renter's podman.
	name := tasks.JobContainerName(p.JobID)
	awaitRunning(t, env, alloc, name)
	if insp := asTenant(t, env, alloc, "container", "inspect", name); strings.Contains(insp, secret) {
		t.Errorf("podman inspect shows the secret value")
	}
	if cmdlines := allCmdlines(t); strings.Contains(cmdlines, secret) {
		t.Errorf("a command line holds the secret value")
	}
	out, _, err = run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: p.JobID, Grace: 30 * time.Second})
	if err != nil || !out.(api.JobStopReport).Signaled {
		t.Fatalf("stop: %v %+v; want signalled", err, out)
	}
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: p.JobID, Wait: 2 * time.Minute})
	r := jobReport(t, out, err)
	if !r.Ended || !r.Cancelled || r.ExitCode != 9 || !strings.Contains(r.Output, "got-term") {
		t.Fatalf("wait %+v; want ended, cancelled, its TERM trap's exit 9", r)
	}
	if !strings.Contains(r.Output, "token="+strconv.Itoa(len(secret))) {
		t.Errorf("output %q; want the secret's length", r.Output)
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Errorf("containers after the cancel: %q; want none", names)
	}
}

// TestJobInImageUnknownImage: an image that cannot be pulled fails the
// job at phase image, before anything of it ran.
func TestJobInImageUnknownImage(t *testing.T) {
	_, env := podmanHost(t)
	srv := workloadtest.Registry(t)
	alloc := "a-jiu" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	ref := srv.Addr() + "/test/none@sha256:" + strings.Repeat("ab", 32)
	out, _, err := run(t, env, api.TaskJobStart, hostproto.JobStartParams{JobID: "j-imgbad", AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Wait: time.Minute, Image: ref, Run: "echo ran"})
	r := jobReport(t, out, err)
	if !r.Ended || r.Phase != api.JobPhaseImage || r.ExitCode != 255 || r.StartedAt != nil || strings.Contains(r.Output, "ran") {
		t.Fatalf("got %+v; want ended at phase image, nothing ran", r)
	}
}

// allCmdlines is every process's command line on the node.
func allCmdlines(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		c, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		b.Write(c)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestJobInImageKillAfterGrace: a job in an image that ignores SIGTERM
// is killed when the stop's grace is over, and reported so.
func TestJobInImageKillAfterGrace(t *testing.T) {
	_, env := podmanHost(t)
	ref := tinyJobImage(t)
	alloc := "a-jik" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	p := hostproto.JobStartParams{JobID: "j-imgkill", AllocationID: alloc, PosixUser: api.PosixUser(alloc), Wait: 0, Image: ref,
		Run: `trap '' TERM; echo ignoring; : > ~/running; while :; do sleep 1; done`}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	name := tasks.JobContainerName(p.JobID)
	awaitRunning(t, env, alloc, name)
	if _, _, err := run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: p.JobID, Grace: time.Second}); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: p.JobID, Wait: 2 * time.Minute})
	if r := jobReport(t, out, err); !r.Ended || !r.Cancelled || r.Signal != "SIGKILL" || r.ExitCode != 137 {
		t.Fatalf("wait %+v; want ended, cancelled by SIGKILL", r)
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Errorf("containers after the kill: %q; want none", names)
	}
}

// awaitRunning waits for the job in container name to have started its
// run phase: its container is up and its script wrote ~/running (the
// home is the container's too).
func awaitRunning(t *testing.T, env *tasks.Env, alloc, name string) {
	t.Helper()
	u, err := user.Lookup(api.PosixUser(alloc))
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "the job to run in "+name, func() bool {
		_, err := os.Stat(filepath.Join(u.HomeDir, "running"))
		return err == nil
	})
	if !strings.Contains(asTenant(t, env, alloc, "ps", "--format", "{{.Names}}"), name) {
		t.Fatalf("no container %s running", name)
	}
}
