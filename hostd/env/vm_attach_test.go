package env_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestVMHotAttachSim: a volume hot-attached to a running sim slice
// (docs/decisions/0055-hot-attach.md; the real guest's is
// cli/daemon TestHostdSliceVMRealGuestHotAttach): bad input and a failed
// mount leave no disk plugged; attach mounts the image at the guest path,
// the guest writes a file, a detach while a process works there is
// ErrVolumeBusy and keeps it, detach unplugs it, and the file is on the
// image; a domain that stops loses its plugged disks.
func TestVMHotAttachSim(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop-mounts an ext4 image: needs root")
	}
	e, hv, alloc := openVM(t)
	ctx := context.Background()
	const vol = "vol-simhot"
	store, img := lentVolume(t, hv, alloc, vol) // destroyed at the end: it loses its plugged disks and mounts
	run := func(cmd string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		pr, err := e.Exec(ctx, env.ExecSpec{Command: cmd, Stdout: &out, Stderr: &errOut})
		if err != nil {
			return "", err
		}
		if st := pr.Wait(); st.Code != 0 || st.Signal != 0 {
			return out.String() + errOut.String(), errors.New("exited non-zero")
		}
		return out.String(), nil
	}
	gp := hv.GuestPath(alloc, "/data/hot")

	for _, bad := range []env.Mount{
		{Name: vol, Source: img, Path: "/etc/hot"},
		{Name: "Vol/x", Source: img, Path: "/data/hot"},
		{Name: vol, Source: "x.img", Path: "/data/hot"},
	} {
		if err := e.Attach(ctx, bad); !errors.Is(err, env.ErrInvalidSpec) {
			t.Errorf("attach %+v: %v; want ErrInvalidSpec", bad, err)
		}
	}
	// A failure half-way: a file where the mount goes.
	mustWrite(t, gp, "mine")
	if err := e.Attach(ctx, env.Mount{Name: vol, Source: img, Path: "/data/hot"}); err == nil {
		t.Fatal("attach over a file succeeded")
	}
	if d := hv.Disks(alloc); len(d) != 0 {
		t.Errorf("a failed attach left disks plugged: %v", d)
	}
	if b, err := os.ReadFile(gp); err != nil || string(b) != "mine" {
		t.Errorf("after a failed attach the guest's file is %q, %v", b, err)
	}
	_ = os.Remove(gp)

	if err := e.Attach(ctx, env.Mount{Name: vol, Source: img, Path: "/data/hot"}); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if d := hv.Disks(alloc); !slices.Equal(d, []string{vol}) {
		t.Errorf("plugged disks %v; want [%s]", d, vol)
	}
	if out, err := run("set -e; grep -q ' " + gp + " ext4 ' /proc/mounts; echo sim-hot >" + gp + "/f"); err != nil {
		t.Fatalf("write on the volume: %v\n%s", err, out)
	}

	pr, pw := io.Pipe()
	pidFile := filepath.Join(t.TempDir(), "busy.pid")
	busy, err := e.Exec(ctx, env.ExecSpec{Command: "cd " + gp + " && echo $$ >" + pidFile + " && echo ready && exec sleep 600", Stdout: pw})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(pr).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("busy process: %q, %v", l, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := e.Detach(ctx, vol); !errors.Is(err, env.ErrVolumeBusy) {
		t.Errorf("detach in use: %v; want ErrVolumeBusy", err)
	}
	if d := hv.Disks(alloc); len(d) != 1 {
		t.Errorf("a refused detach unplugged the disk: %v", d)
	}
	if out, err := run("kill $(cat " + pidFile + ")"); err != nil {
		t.Fatalf("kill: %v\n%s", err, out)
	}
	busy.Wait()
	_ = pw.Close()
	// The process's end and the mount's release are not one step: detach
	// once the guest has let go.
	var derr error
	testutil.Eventually(t, "the guest lets go of the volume", func() bool {
		derr = e.Detach(ctx, vol)
		return !errors.Is(derr, env.ErrVolumeBusy)
	})
	if derr != nil {
		t.Fatalf("detach: %v", derr)
	}
	if d := hv.Disks(alloc); len(d) != 0 {
		t.Errorf("after detach disks %v are plugged", d)
	}
	// Read-only: the file is there, nothing can be written.
	ro := hv.GuestPath(alloc, "/data/ro")
	if err := e.Attach(ctx, env.Mount{Name: vol, Source: img, Path: "/data/ro", ReadOnly: true}); err != nil {
		t.Fatalf("attach read-only: %v", err)
	}
	if out, err := run("cat " + ro + "/f"); err != nil || out != "sim-hot\n" {
		t.Errorf("read-only volume reads %q, %v", out, err)
	}
	if out, err := run("echo x >" + ro + "/g"); err == nil {
		t.Errorf("wrote on a read-only volume: %s", out)
	}
	if err := e.Detach(ctx, vol); err != nil {
		t.Fatalf("detach read-only: %v", err)
	}
	if err := store.Return(ctx, vol, alloc); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if _, err := store.Mount(ctx, vol, mnt, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Unmount(ctx, vol) }()
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || strings.TrimSpace(string(b)) != "sim-hot" {
		t.Errorf("on the host f = %q, %v", b, err)
	}
	if err := store.Unmount(ctx, vol); err != nil {
		t.Fatal(err)
	}

	// A domain that stops loses what was plugged into it.
	if img, err = store.Lend(ctx, vol, alloc); err != nil {
		t.Fatal(err)
	}
	if err := e.Attach(ctx, env.Mount{Name: vol, Source: img, Path: "/data/hot"}); err != nil {
		t.Fatalf("attach again: %v", err)
	}
	if err := hv.Destroy(ctx, alloc); err != nil {
		t.Fatal(err)
	}
	if d := hv.Disks(alloc); len(d) != 0 {
		t.Errorf("a destroyed domain keeps disks %v", d)
	}
	if b, _ := os.ReadFile("/proc/mounts"); strings.Contains(string(b), " "+gp+" ") {
		t.Errorf("a destroyed domain's volume is still mounted at %s", gp)
	}
}
