package tasks_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// writeGuestImage puts a guest image directory (the layout of gpuaas ops
// image build, with small stand-in files) in the host's image dir and
// returns the disk's digest.
func writeGuestImage(t *testing.T, h *sim.Host, name string) (string, guestimage.Manifest) {
	t.Helper()
	dir := filepath.Join(h.ImageDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string]string{guestimage.DiskFile: "QFI\xfb disk " + name, guestimage.KernelFile: "kernel", guestimage.InitrdFile: "initrd"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := guestimage.Manifest{Cmdline: guestimage.KernelCmdline, Disk: guestimage.File{Name: guestimage.DiskFile},
		Kernel: guestimage.File{Name: guestimage.KernelFile}, Initrd: guestimage.File{Name: guestimage.InitrdFile}}
	if err := guestimage.WriteManifest(dir, &m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// A guest image directory is verified against its manifest and the
// pinned disk digest, the overlay is made on its disk, and the domain
// boots its kernel and initrd.
func TestVMProvisionGuestImage(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	dir, m := writeGuestImage(t, h, "debian-12-slice")
	const alloc = "a-guestimage1"
	p := provisionParams(h, alloc, s[:1])
	p.Image = api.VMImage{Name: "debian-12-slice", SHA256: m.Disk.SHA256}
	if _, _, err := run(t, env, api.TaskVMProvision, p); err != nil {
		t.Fatal(err)
	}
	spec, err := h.Hypervisor.Spec(alloc)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	if spec.Kernel != filepath.Join(abs, guestimage.KernelFile) || spec.Initrd != filepath.Join(abs, guestimage.InitrdFile) ||
		spec.Cmdline != guestimage.KernelCmdline {
		t.Errorf("boot = %q %q %q; want the image's kernel, initrd and cmdline", spec.Kernel, spec.Initrd, spec.Cmdline)
	}
	var overlay string
	for _, c := range h.Runner.Calls() {
		if c[0] == "qemu-img" {
			overlay = strings.Join(c, " ")
		}
	}
	if !strings.Contains(overlay, "-b "+filepath.Join(abs, guestimage.DiskFile)+" ") {
		t.Errorf("overlay command %q is not on the image's disk", overlay)
	}
}

// The bad-input case of guest images: a guest image whose files do not match
// its manifest, or whose disk is not the pinned one, fails image_verify
// with the reason and leaves nothing behind.
func TestVMProvisionGuestImageCorrupt(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	dir, m := writeGuestImage(t, h, "debian-12-corrupt")
	if err := os.WriteFile(filepath.Join(dir, guestimage.KernelFile), []byte("kernel, changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, other := writeGuestImage(t, h, "debian-12-other")
	tests := []struct {
		name, image, pin string
		wantMsg          string
	}{
		{"file changed", "debian-12-corrupt", m.Disk.SHA256, "image digest mismatch"},
		{"other disk pinned", "debian-12-other", m.Disk.SHA256, "manifest records disk sha256 " + other.Disk.SHA256},
	}
	for _, tt := range tests {
		p := provisionParams(h, "a-guestbad", s[:1])
		p.Image = api.VMImage{Name: tt.image, SHA256: tt.pin}
		_, _, err := run(t, env, api.TaskVMProvision, p)
		pe := wantPhaseError(t, err, tasks.PhaseImageVerify)
		if !errors.Is(pe, tasks.ErrImageChecksum) || !strings.Contains(pe.Error(), tt.wantMsg) {
			t.Errorf("%s: got %v; want ErrImageChecksum containing %q", tt.name, pe, tt.wantMsg)
		}
		if got := leftovers(t, h, "a-guestbad"); len(got) != 0 {
			t.Errorf("%s: left %v", tt.name, got)
		}
	}
}
