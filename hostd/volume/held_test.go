package volume

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageHeldElsewhereIsNeverCheckedOrMounted: a mount namespace that
// bound a volume's mount elsewhere (a container's bind mount) keeps its filesystem live after the node's umount, with what
// was written after the copy in its page cache. The store does not let
// go of the image while its loop device stays open: Unmount says so
// (ErrMounted), and Mount refuses rather than run e2fsck on, and mount a
// second time, a live ext4. Once the namespace ends, Mount finds every
// byte written.
func TestImageHeldElsewhereIsNeverCheckedOrMounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices and mount need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip(err)
	}
	s, base := newStore(t)
	ctx := context.Background()
	const id = "vol-held"
	if _, err := s.Create(ctx, id, 16*MiB); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "mnt", id)
	if _, err := s.Mount(ctx, id, target, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	// A bind of it elsewhere in that namespace, as a container's: the
	// kernel detaches copies AT the mount point when the node removes
	// the directory, not this one.
	other := filepath.Join(base, "elsewhere")
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mkdir -p "+other+" && mount --bind "+target+" "+other+" && echo ready && exec sleep 600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("unshare: %q, %v", l, err)
	}
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("after the copy\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := s.Unmount(ctx, id); !errors.Is(err, ErrMounted) {
		t.Fatalf("unmount while another namespace holds the filesystem: %v; want ErrMounted", err)
	}
	if _, err := s.Mount(ctx, id, target, 4321, 4321); !errors.Is(err, ErrMounted) {
		t.Fatalf("mount while another namespace holds the filesystem: %v; want ErrMounted", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := s.Mount(ctx, id, target, 4321, 4321); err != nil {
		t.Fatalf("mount once the namespace ended: %v", err)
	}
	t.Cleanup(func() { _ = s.Unmount(ctx, id) })
	if b, err := os.ReadFile(filepath.Join(target, "f")); err != nil || strings.TrimSpace(string(b)) != "after the copy" {
		t.Errorf("f = %q, %v; want what was written after the copy", b, err)
	}
}
