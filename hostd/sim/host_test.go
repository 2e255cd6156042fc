package sim

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/hostd/host"
)

// The catalog pins the checksum of the image the sim hosts carry.
func TestDefaultImageChecksum(t *testing.T) {
	dir := t.TempDir()
	sum, err := WriteImage(dir, catalog.DefaultImage.Name)
	if err != nil {
		t.Fatal(err)
	}
	if catalog.DefaultImage.Name != DefaultImageName {
		t.Errorf("catalog image %q; sim carries %q", catalog.DefaultImage.Name, DefaultImageName)
	}
	if sum != catalog.DefaultImage.SHA256 {
		t.Errorf("sha256 of the sim image = %s; catalog.DefaultImage pins %s", sum, catalog.DefaultImage.SHA256)
	}
	if again, _ := WriteImage(dir, catalog.DefaultImage.Name); again != sum {
		t.Errorf("WriteImage is not deterministic: %s, then %s", sum, again)
	}
	if other := ImageSHA256("other"); other == sum {
		t.Error("two image names give the same checksum")
	}
}

func TestNewHost(t *testing.T) {
	state := t.TempDir()
	h, err := NewHost(state, H200Slice8(), "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "sim", "tree", "sys", "bus", "pci", "devices")); err != nil {
		t.Errorf("no sysfs tree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.ImageDir, DefaultImageName+".img")); err != nil {
		t.Errorf("no image: %v", err)
	}
	env := h.Env("n-1", nil)
	if env.StateDir != state || env.NodeName != "sim-h200-1" || env.Hypervisor == nil || env.Faults == nil {
		t.Errorf("Env = %+v", env)
	}
	marker := filepath.Join(state, "sim", "tree", "marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: the tree is reused, not rewritten.
	h2, err := NewHost(state, H200Slice8(), "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the tree was rewritten: %v", err)
	}
}

func TestRunner(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := NewRunner()
	in := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ud, md, nc := in("user-data", "#cloud-config\n"), in("meta-data", "instance-id: x\n"), in("network-config", "version: 2\n")
	iso := filepath.Join(dir, "seed.iso")
	if _, err := r.Run(ctx, "cloud-localds", iso, ud, md, "--network-config", nc); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(iso); err != nil || !strings.Contains(string(b), "network-config") {
		t.Errorf("seed.iso = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(ud); string(b) != "#cloud-config\n" {
		t.Errorf("cloud-localds changed user-data: %q", b)
	}
	if _, err := r.Run(ctx, "cloud-localds", iso, filepath.Join(dir, "missing")); err == nil {
		t.Error("cloud-localds with a missing user-data succeeded")
	}

	base := in("base.img", "base")
	overlay := filepath.Join(dir, "o.qcow2")
	if _, err := r.Run(ctx, "qemu-img", "create", "-f", "qcow2", "-F", "qcow2", "-b", base, overlay); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(overlay); err != nil {
		t.Errorf("no overlay: %v", err)
	}
	if _, err := r.Run(ctx, "qemu-img", "create", "-f", "qcow2", "-b", filepath.Join(dir, "nobase"), overlay+"2"); err == nil {
		t.Error("qemu-img with a missing backing file succeeded")
	}
	if _, err := r.Run(ctx, "blkdiscard", "-f", "/dev/disk/by-id/nvme-x"); err != nil {
		t.Error(err)
	}
	if _, err := r.Run(ctx, "rm", "-rf", "/"); err == nil {
		t.Error("an unknown command succeeded")
	}
	r.FailCommand("blkdiscard", "BLKDISCARD ioctl failed: Operation not supported")
	_, err := r.Run(ctx, "blkdiscard", "-f", "/dev/x")
	if host.ExitCode(err) != 1 || !strings.Contains(err.Error(), "Operation not supported") {
		t.Errorf("failed blkdiscard: got %v; want exit 1 with the message", err)
	}
	r.ClearFailures()
	if _, err := r.Run(ctx, "blkdiscard", "/dev/x"); err != nil {
		t.Errorf("after ClearFailures: %v", err)
	}
	calls := r.Calls()
	want := []string{"cloud-localds", "cloud-localds", "qemu-img", "qemu-img", "blkdiscard", "rm", "blkdiscard", "blkdiscard"}
	var got []string
	for _, c := range calls {
		got = append(got, c[0])
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls = %v; want %v", got, want)
	}
	if !reflect.DeepEqual(calls[4], []string{"blkdiscard", "-f", "/dev/disk/by-id/nvme-x"}) {
		t.Errorf("call 4 = %v", calls[4])
	}
}

func TestUsers(t *testing.T) {
	ctx := context.Background()
	u, err := NewUsers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOxQbfNRUG2dkK4J5Ca1y4KGxvdp3Iu6SMbw6U/9TqLf a@b"}
	if err := u.Create(ctx, "galice", keys); err != nil {
		t.Fatal(err)
	}
	if err := u.Create(ctx, "galice", keys); err == nil || !strings.Contains(err.Error(), host.ErrUserExists.Error()) {
		t.Errorf("second Create: got %v; want ErrUserExists", err)
	}
	if b, _ := os.ReadFile(u.AuthorizedKeysPath("galice")); string(b) != keys[0]+"\n" {
		t.Errorf("authorized_keys = %q", b)
	}
	if ok, _ := u.Exists(ctx, "galice"); !ok {
		t.Error("Exists = false after Create")
	}
	if err := u.KillProcesses(ctx, "galice"); err != nil {
		t.Fatal(err)
	}
	if got := u.Killed(); !slices.Equal(got, []string{"galice"}) {
		t.Errorf("Killed = %v", got)
	}
	for range 2 {
		if _, err := u.Delete(ctx, "galice"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := u.Exists(ctx, "galice"); ok {
		t.Error("Exists = true after Delete")
	}
	if err := u.Create(ctx, "../etc", nil); err == nil {
		t.Error("Create with a path for a name succeeded")
	}
}
