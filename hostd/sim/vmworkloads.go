package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/workload"
)

// A sim guest with system users runs its users' rootless podman as their
// accounts (hostd reaches it through the guest's sshd, as in a VM:
// docs/apps.md, "Slices"). The sim plays the guest's root for what a real
// guest's boot does for workloads:
//
//   - useradd in a Debian guest gives a new user a subordinate id range
//     (/etc/subuid exists): a sim guest's user gets one at boot, in the
//     machine's /etc/subuid (which is the sim guest's), and loses it with
//     its account (userdel removes a user's ranges).
//   - the guest's boot writes a CDI spec of the guest's GPUs
//     (/var/run/cdi/gpuaas-<domain>.json): the sim makes the guest's
//     device nodes (the passed-through devices as the guest's driver
//     numbers them, in the domain's hostdev order) and that spec.
//   - powering a VM off ends its containers: the sim stops its users'
//     containers (processes of their subordinate ids, which ending the
//     user's own processes misses) before their accounts are parked.

// guestNodeDir is where the sim keeps the device nodes of the guest of
// domain name (as root): under /run, where a user's rootless podman can
// reach them.
func (h *Hypervisor) guestNodeDir(name string) string {
	sum := sha256.Sum256([]byte(h.dir))
	return filepath.Join("/run/gpuaas-sim", hex.EncodeToString(sum[:6]), "guests", name)
}

// bootGuestWorkloads gives the guest's users their subordinate ids and
// writes the guest's GPU devices and CDI spec; h.mu must be held.
func (h *Hypervisor) bootGuestWorkloads(spec host.DomainSpec, users []string) error {
	if h.guests == nil || os.Geteuid() != 0 {
		return nil // sandbox guests run as hostd: no workload runs there
	}
	ids := workload.SubIDs{Runner: host.ExecRunner{}}
	for _, u := range users {
		if _, err := ids.Ensure(context.Background(), u); err != nil {
			return fmt.Errorf("guest %s: %w", spec.Name, err)
		}
	}
	return h.writeGuestGPUs(spec)
}

// writeGuestGPUs makes the guest's nvidia<i> (one per hostdev) and
// control nodes, and its spec naming them; a guest without devices gets
// neither.
func (h *Hypervisor) writeGuestGPUs(spec host.DomainSpec) error {
	dir := h.guestNodeDir(spec.Name)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("guest gpus: %w", err)
	}
	if len(spec.HostDevs) == 0 {
		return workload.RemoveCDISpec(workload.CDIDir, spec.Name)
	}
	dev := filepath.Join(dir, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return fmt.Errorf("guest gpus: %w", err)
	}
	var gpus []workload.GPUDevice
	for i := range spec.HostDevs {
		if err := mkCharDev(filepath.Join(dev, fmt.Sprintf("nvidia%d", i)), nvidiaMajor, i); err != nil {
			return err
		}
		gpus = append(gpus, workload.GPUDevice{Minor: i})
	}
	for _, c := range []struct {
		name         string
		major, minor int
	}{{"nvidiactl", nvidiaMajor, nvidiaCtl}, {"nvidia-uvm", nvidiaUVMSim, 0}, {"nvidia-uvm-tools", nvidiaUVMSim, 1}} {
		if err := mkCharDev(filepath.Join(dev, c.name), c.major, c.minor); err != nil {
			return err
		}
	}
	cdi, _, err := workload.GPUSpec(dir, spec.Name, gpus)
	if err != nil {
		return fmt.Errorf("guest gpus: %w", err)
	}
	return workload.WriteCDISpec(workload.CDIDir, spec.Name, cdi)
}

// haltGuestWorkloads stops the containers of the guest's users, as its
// power-off would, and removes its devices and spec; h.mu must be held.
func (h *Hypervisor) haltGuestWorkloads(name string, users []string) error {
	if h.guests == nil || os.Geteuid() != 0 {
		return nil
	}
	var errs []error
	for _, u := range users {
		errs = append(errs, h.stopGuestContainers(u))
	}
	errs = append(errs, workload.RemoveCDISpec(workload.CDIDir, name), os.RemoveAll(h.guestNodeDir(name)))
	return errors.Join(errs...)
}

// stopGuestContainers kills every container of guest user u at once
// (podman stop, as the user, with its sessions' environment so that it
// finds their storage). A user that never ran podman has none.
func (h *Hypervisor) stopGuestContainers(u string) error {
	ctx := context.Background()
	a, err := h.guests.Accounts().Lookup(ctx, u)
	if err != nil || a.Credential == nil {
		return nil // no account: nothing of it runs
	}
	if _, err := os.Stat(filepath.Join(a.Home, ".local", "share", "containers")); err != nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, "podman", "--runtime", "runc", "stop", "--all", "--time", "0")
	cmd.Dir = a.Home
	cmd.Env = []string{"HOME=" + a.Home, "USER=" + u, "LOGNAME=" + u, "PATH=" + guestPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: a.Credential}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stop containers of guest user %s: %w: %s", u, err, out)
	}
	return nil
}
