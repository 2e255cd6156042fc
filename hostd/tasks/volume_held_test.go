package tasks_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestHotDetachRefusedWhileMountedInNamespace: a process in a mount
// namespace of its own that has the volume mounted (as a container's bind
// mount has it; its cwd, root and fds are not under the node's mount
// point) makes a detach busy, naming that process, the volume still
// mounted on the node; once it exits the detach unmounts the volume.
// (docs/decisions/0064-volume-attach-running.md)
func TestHotDetachRefusedWhileMountedInNamespace(t *testing.T) {
	v := attachedVolume(t, systemHost(t), "held") // volume_propagation_test.go
	env, p, target := v.env, v.p, v.target

	// A private copy of the node's mounts, with a bind mount of the
	// volume elsewhere in it, as podman gives a container (-v).
	inner := t.TempDir()
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount --bind "+target+" "+inner+" && cd / && exec sleep 600")
	holder.Dir = "/"
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	holderPid := strconv.Itoa(holder.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile("/proc/" + holderPid + "/comm")
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never started")
		}
		time.Sleep(10 * time.Millisecond)
	}

	_, _, err := run(t, env, api.TaskVolumeDetach, p)
	if !errors.Is(err, hostenv.ErrVolumeBusy) || !strings.Contains(err.Error(), holderPid) {
		t.Fatalf("detach while another namespace mounts it: %v; want busy naming process %s", err, holderPid)
	}
	if mp := v.mountPoint(t); mp != target {
		t.Fatalf("after a refused detach mounted at %q; want still %s", mp, target)
	}

	_ = holder.Process.Kill()
	_ = holder.Wait()
	if _, _, err := run(t, env, api.TaskVolumeDetach, p); err != nil {
		t.Fatalf("detach once nothing holds it: %v", err)
	}
	if mp := v.mountPoint(t); mp != "" {
		t.Fatalf("after detach mounted at %q; want not mounted", mp)
	}
}

// TestHotDetachSeesANamespaceWithoutProcesses: a mount namespace kept by
// a bind of its nsfs file alone (no process in it) with the volume bound
// elsewhere keeps the filesystem live; no process's mount table shows it.
// The detach is busy, and stays busy on a retry (the volume no longer
// mounted on the node), until that namespace is gone.
func TestHotDetachSeesANamespaceWithoutProcesses(t *testing.T) {
	v := attachedVolume(t, systemHost(t), "nsfs") // volume_propagation_test.go
	env, p, target := v.env, v.p, v.target
	inner, pin := t.TempDir(), filepath.Join(t.TempDir(), "mnt-ns")
	if err := os.WriteFile(pin, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount --bind "+target+" "+inner+" && cd / && echo ready && exec sleep 600")
	holder.Dir = "/"
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	buf := make([]byte, 6)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "ready\n" {
		t.Fatalf("holder: %q, %v", buf[:n], err)
	}
	if b, err := exec.Command("mount", "--bind", "/proc/"+strconv.Itoa(holder.Process.Pid)+"/ns/mnt", pin).CombinedOutput(); err != nil {
		t.Fatalf("pin the namespace: %v: %s", err, b)
	}
	unpinned := false
	unpin := func() {
		if !unpinned {
			unpinned = true
			_ = exec.Command("umount", pin).Run()
		}
	}
	t.Cleanup(unpin)
	_ = holder.Process.Kill()
	_ = holder.Wait()

	for i := range 2 {
		if _, _, err := run(t, env, api.TaskVolumeDetach, p); !errors.Is(err, hostenv.ErrVolumeBusy) {
			t.Fatalf("detach %d while a namespace without processes holds the filesystem: %v; want busy", i+1, err)
		}
	}
	unpin()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, _, err := run(t, env, api.TaskVolumeDetach, p)
		if err == nil {
			break
		}
		if !errors.Is(err, hostenv.ErrVolumeBusy) || time.Now().After(deadline) {
			t.Fatalf("detach once the namespace is gone: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
