package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Host is a simulated GPU host: everything a hostd needs to run the real
// task code against the sim, kept under <stateDir>/sim:
//
//	sim/tree/{sys,dev,proc}   the profile's sysfs/devfs/procfs (written once)
//	sim/images/<name>.img     base images (DefaultImageName)
//	sim/hypervisor/           domain records, guest host keys and sandboxes
//	sim/users/<name>/         sandbox users (with system users: parked users' records)
//	sim/homes/<name>/         system users' homes (Options.SystemUsers)
//	sim/gpus/<pci>.{load,ecc} GPU telemetry knobs (gpus.go)
//	sim/smi/{host,guests/<domain>}/nvidia-smi  what renters run (smiscript.go)
type Host struct {
	// StateDir is hostd's state directory, which the tasks use for leases,
	// seeds, VM keys and overlay disks.
	StateDir   string
	NodeName   string
	Profile    Profile
	Hypervisor *Hypervisor
	Users      *Users
	Runner     *Runner
	Topology   topology.Host
	ImageDir   string
	// ImageSHA256 is the checksum of DefaultImageName as written.
	ImageSHA256 string
	Faults      *tasks.Faults

	boot time.Time // the kernel log's clock (xid.go)
	gpu  gpuFaults
}

// Options are what NewHostWith can do beyond NewHost.
type Options struct {
	// SystemUsers makes the bare-metal users, and the users of running
	// sim guests, real POSIX accounts whose sessions run unprivileged, as
	// on a real node or in a real VM (NewSystemUsers; it needs root). Their homes are in stateDir/sim/homes: stateDir and
	// stateDir/sim are made 0711 (anyone may pass through, no one but
	// root may list them; what hostd keeps there is 0700 or 0600), and
	// every directory above stateDir must let others search it.
	SystemUsers bool
}

// NewHost opens the sim host with sandbox users: NewHostWith without
// options.
func NewHost(stateDir string, p Profile, nodeName string) (*Host, error) {
	return NewHostWith(stateDir, p, nodeName, Options{})
}

// NewHostWith opens (or first makes) the sim host kept under stateDir/sim. The
// profile's tree is written only when absent, so a restarted hostd sees
// the same hardware, and the domains it left running are running again.
//
// On a gpu_slice host the fabric VFs are first bound to vfio-pci, as an
// operator prepares a slice host (driverctl set-override): the profiles
// list them on mlx5_core, and hostd passes through only what is on
// vfio-pci.
func NewHostWith(stateDir string, p Profile, nodeName string, o Options) (*Host, error) {
	if p.Shape == api.ShapeGPUSlice {
		p = p.BindVFs("vfio-pci")
	}
	simDir := filepath.Join(stateDir, "sim")
	dirMode := os.FileMode(0o700)
	if o.SystemUsers {
		dirMode = 0o711
	}
	for _, d := range []string{stateDir, simDir} {
		if err := os.MkdirAll(d, dirMode); err != nil {
			return nil, fmt.Errorf("sim host: %w", err)
		}
		if err := os.Chmod(d, dirMode); err != nil {
			return nil, fmt.Errorf("sim host: %w", err)
		}
	}
	tree := filepath.Join(simDir, "tree")
	if err := writeTreeOnce(tree, p); err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	boot, err := openKernelLog(stateDir)
	if err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	imageDir := filepath.Join(simDir, "images")
	sum, err := WriteImage(imageDir, DefaultImageName)
	if err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	var users *Users
	if o.SystemUsers {
		users, err = NewSystemUsers(context.Background(), filepath.Join(simDir, "users"), filepath.Join(simDir, "homes"))
	} else {
		users, err = NewUsers(filepath.Join(simDir, "users"))
	}
	if err != nil {
		return nil, err
	}
	var guests *Users
	if o.SystemUsers { // a slice host's guests have system users too
		guests = users
	}
	// The GPU knobs' directory exists from the start, so a person can
	// echo a load into it (gpus.go).
	if err := os.MkdirAll(GPUStateDir(stateDir), 0o755); err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	runner := NewRunner()
	runner.setGPUs(GPUStateDir(stateDir), tree, p)
	if err := runner.writeGPUInventory(stateDir); err != nil { // inventory.go
		return nil, err
	}
	if err := runner.writeGPUDevices(tree, gpuNodeDir(stateDir), p); err != nil { // gpudev.go
		return nil, fmt.Errorf("sim host: %w", err)
	}
	smiDir, err := makeSMIDirs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	tools := func(domain string, hostdevs []host.PCIAddress) (string, error) {
		dir := filepath.Join(smiDir, "guests", domain)
		return dir, runner.writeGuestSMI(dir, hostdevs)
	}
	hv, err := newHypervisor(filepath.Join(simDir, "hypervisor"), guests, tools)
	if err != nil {
		return nil, err
	}
	hv.setGuestNvidiaSMI(runner.guestNvidiaSMI)
	if p.Shape == api.ShapeBaremetal {
		// A bare-metal renter's shells find it in ~/.local/bin (users.go).
		if err := runner.writeHostSMI(filepath.Join(smiDir, "host")); err != nil {
			return nil, fmt.Errorf("sim host: %w", err)
		}
		users.hostTools = filepath.Join(smiDir, "host")
	}
	return &Host{
		StateDir:    stateDir,
		NodeName:    nodeName,
		Profile:     p,
		Hypervisor:  hv,
		Users:       users,
		Runner:      runner,
		Topology:    topology.At(tree, p.LookPath),
		ImageDir:    imageDir,
		ImageSHA256: sum,
		Faults:      &tasks.Faults{},
		boot:        boot,
	}, nil
}

// BindVFs binds every fabric VF to driver ("" for none).
func (p Profile) BindVFs(driver string) Profile {
	c := p.Clone()
	for i := range c.VFs {
		c.VFs[i].Driver = driver
	}
	return c
}

// BindGPUs binds every GPU to driver ("" for none): H200Slice8 with its
// GPUs on nvidia is a slice host whose GPUs the host's nvidia-smi sees.
func (p Profile) BindGPUs(driver string) Profile {
	c := p.Clone()
	for i := range c.GPUs {
		c.GPUs[i].Driver = driver
	}
	return c
}

// writeTreeOnce writes the profile under dir unless a tree is there: into
// a temporary directory first, so a crash never leaves half a tree.
func writeTreeOnce(dir string, p Profile) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tree-*")
	if err != nil {
		return err
	}
	if err := WriteTree(tmp, p); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return nil
}

// Env is a task environment on this host.
func (h *Host) Env(nodeID string, log *slog.Logger) *tasks.Env {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &tasks.Env{
		NodeID:     nodeID,
		NodeName:   h.NodeName,
		Hypervisor: h.Hypervisor,
		Users:      h.Users,
		Runner:     h.Runner,
		Topology:   h.Topology,
		StateDir:   h.StateDir,
		ImageDir:   h.ImageDir,
		Faults:     h.Faults,
		KernelLog:  h.KernelLog(),
		KernelBoot: h.boot,
		GPUCheck:   h,
		Envs:       h.jobEnvs(log),
		Volumes:    h.volumeStore(log),
		VolumeRoot: h.volumeRoot(),
		DeviceRoot: filepath.Join(h.StateDir, "sim", "tree"),
		Now:        time.Now,
		Log:        log,
	}
}

// Close stops the guests' SSH servers, the domains staying recorded as
// they are (see Hypervisor.Close), and parks system users (see
// systemUsers.park).
func (h *Host) Close() error {
	return errors.Join(h.Hypervisor.Close(), h.Users.Close(), os.RemoveAll(gpuNodeDir(h.StateDir)))
}
