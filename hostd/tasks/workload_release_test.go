package tasks_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestReleaseResetsStorageWithNothingOfTheUsersRunning releases an
// allocation while a process of its user keeps writing under its podman
// storage (as a log follower's podman or a status poll's does at a
// release): the release ends the user's processes before `podman system
// reset`, which would otherwise fail with "directory not empty" and leave
// the allocation release_failed, and nothing of the storage remains.
func TestReleaseResetsStorageWithNothingOfTheUsersRunning(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	alloc := "a-wlrel" + strconv.Itoa(os.Getpid())
	a := provisionTenant(t, env, alloc)
	out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-rel", AllocationID: alloc,
		PosixUser: a.name, Image: ref, Command: []string{workloadtest.App, "serve"}})
	if r := wlReport(t, out, err); r.State != api.ContainerRunning {
		t.Fatalf("start: %+v; want running", r)
	}
	graph := strings.TrimSpace(asTenant(t, env, alloc, "info", "--format", "{{.Store.GraphRoot}}"))
	if !filepath.IsAbs(graph) {
		t.Fatalf("graph root %q", graph)
	}
	// Four writers as the user, each creating files in the storage's
	// top directory as fast as it can while the directory exists.
	writer := exec.Command("/bin/sh", "-c", `for w in 1 2 3 4; do
  (i=0; while [ -d "$0" ]; do i=$((i+1)); : > "$0/busy-$w-$((i % 64))" 2>/dev/null; done) &
done
wait`, graph)
	writer.Dir, writer.Env = "/", []string{"PATH=/usr/bin:/bin"}
	writer.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}}
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- writer.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-writer.Process.Pid, syscall.SIGKILL)
		<-done
	})

	if _, _, err := run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: alloc, PosixUser: a.name}); err != nil {
		t.Fatalf("release with a process of the user's writing in its podman storage: %v", err)
	}
	if _, err := os.Stat(graph); !os.IsNotExist(err) {
		t.Errorf("the user's podman storage %s after release: %v; want gone", graph, err)
	}
	if procs := processesIn(t, a.uid, a.uid+1); procs != "" {
		t.Errorf("processes of the released user: %s", procs)
	}
}
