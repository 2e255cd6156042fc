package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The sim's GPU device nodes, where the NVIDIA driver makes them on a
// real host, under the sim tree:
//
//	dev/nvidia<minor>                          one per GPU on the nvidia driver
//	dev/nvidiactl, dev/nvidia-uvm, dev/nvidia-uvm-tools
//	proc/driver/nvidia/gpus/<pci>/information  "Device Minor:", "GPU UUID:", ...
//
// hostd's workloads read them as they read a real host's (hostd/workload,
// cdi.go) to give a container exactly its allocation's GPUs. They are
// character devices with the driver's numbers (major 195) when the sim
// may make them (root), else empty files: a container is given them by
// bind mount either way, and nothing opens them (no driver answers).
//
// As root the nodes themselves are in /run/gpuaas-sim/<host>/dev/ and the
// tree's dev/ names them by symlink: a tenant's rootless podman must
// reach a node to bind-mount it, and a sim's state directory is often
// below /tmp, which a tenant's sessions see as their own private /tmp.

// nvidiaMajor is the NVIDIA driver's character device major; nvidiactl
// is its minor 255. nvidia-uvm's major is dynamic on a real host.
const (
	nvidiaMajor   = 195
	nvidiaCtl     = 255
	nvidiaUVMSim  = 510                       // the sim's nvidia-uvm major
	devNodePerms  = 0o666                     // the driver's default (NVreg_DeviceFileMode)
	gpuProcSubdir = "proc/driver/nvidia/gpus" // the driver's records, one directory per GPU
)

// writeGPUDevices (re)writes the device nodes and the driver's records of
// the host's GPUs on the nvidia driver, numbered in PCI order as the
// driver numbers them. Written at every start (trees of older sims lack
// them); the tree is made traversable, so that a tenant's rootless
// podman can bind-mount a node (nothing in the tree is secret).
func (r *Runner) writeGPUDevices(tree, nodes string, p Profile) error {
	r.mu.Lock()
	gpus := r.gpus
	r.mu.Unlock()
	if err := os.Chmod(tree, 0o755); err != nil {
		return fmt.Errorf("gpu devices: %w", err)
	}
	dev := filepath.Join(tree, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return fmt.Errorf("gpu devices: %w", err)
	}
	if err := os.RemoveAll(nodes); err != nil {
		return fmt.Errorf("gpu devices: %w", err)
	}
	if err := os.MkdirAll(nodes, 0o755); err != nil {
		if !errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("gpu devices: %w", err)
		}
		nodes = dev // not root: the nodes in the tree
	}
	// mkNode makes node name in nodes, named in the tree's dev/.
	mkNode := func(name string, major, minor int) error {
		at := filepath.Join(nodes, name)
		if err := mkCharDev(at, major, minor); err != nil {
			return err
		}
		if nodes == dev {
			return nil
		}
		if err := os.Symlink(at, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("gpu devices: %w", err)
		}
		return nil
	}
	procDir := filepath.Join(tree, filepath.FromSlash(gpuProcSubdir))
	if err := os.RemoveAll(procDir); err != nil {
		return fmt.Errorf("gpu devices: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(dev, "nvidia*"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("gpu devices: %w", err)
		}
	}
	driver := map[string]string{}
	for _, g := range p.GPUs {
		driver[g.PCI] = g.Driver
	}
	minor := 0
	for _, g := range gpus { // in PCI order (setGPUs)
		if driver[g.pci] != "nvidia" {
			continue
		}
		if err := mkNode(fmt.Sprintf("nvidia%d", minor), nvidiaMajor, minor); err != nil {
			return err
		}
		info := fmt.Sprintf("Model: \t\t NVIDIA %s\nGPU UUID: \t %s\nBus Type: \t PCIe\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded: \t No\n",
			r.model, g.uuid, strings.ToLower(g.pci), minor)
		dir := filepath.Join(procDir, strings.ToLower(g.pci))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("gpu devices: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o444); err != nil {
			return fmt.Errorf("gpu devices: %w", err)
		}
		minor++
	}
	if minor == 0 {
		return nil // no GPU on the driver: no driver, no control nodes
	}
	ctl := []struct {
		name         string
		major, minor int
	}{{"nvidiactl", nvidiaMajor, nvidiaCtl}, {"nvidia-uvm", nvidiaUVMSim, 0}, {"nvidia-uvm-tools", nvidiaUVMSim, 1}}
	for _, c := range ctl {
		if err := mkNode(c.name, c.major, c.minor); err != nil {
			return err
		}
	}
	return nil
}

// mkCharDev makes a character device node, or an empty file where the
// sim may not make device nodes (not root).
func mkCharDev(path string, major, minor int) error {
	err := unix.Mknod(path, unix.S_IFCHR|devNodePerms, int(unix.Mkdev(uint32(major), uint32(minor))))
	if errors.Is(err, unix.EPERM) {
		err = os.WriteFile(path, nil, devNodePerms)
	}
	if err != nil {
		return fmt.Errorf("gpu devices: %s: %w", path, err)
	}
	// Mknod's mode is filtered by the umask.
	if err := os.Chmod(path, devNodePerms); err != nil {
		return fmt.Errorf("gpu devices: %w", err)
	}
	return nil
}

// gpuNodeDir is where the sim host under stateDir keeps its device nodes
// (as root): dev/ in its own directory under /run, the one its volumes
// are mounted in (volumes.go: traversable by its users).
func gpuNodeDir(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join("/run/gpuaas-sim", hex.EncodeToString(sum[:6]), "dev")
}
