package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// SlicePaths are where a slice VM's host-side files live under hostd's
// state directory.
type SlicePaths struct {
	Lease   string // leases/<alloc>.json
	SeedDir string // seeds/<alloc>/: user-data, meta-data, network-config, seed.iso
	SeedISO string
	// VMKey is the private half of the per-VM terminal key (OpenSSH PEM,
	// 0600) that hostd uses to hop into the VM as its POSIX user; VMKeyPub
	// is the authorized_keys line.
	VMKey    string // vmkeys/<alloc>
	VMKeyPub string // vmkeys/<alloc>.pub
	Overlay  string // disks/<alloc>.qcow2, the boot disk over the base image
}

// PathsFor is where allocation alloc's slice files live under stateDir.
func PathsFor(stateDir, alloc string) SlicePaths {
	// The environment reads the VM key and the seed (hostd/env): one
	// definition of where they are.
	seed := hostenv.SeedDir(stateDir, alloc)
	return SlicePaths{
		Lease:    filepath.Join(stateDir, "leases", alloc+".json"),
		SeedDir:  seed,
		SeedISO:  filepath.Join(seed, "seed.iso"),
		VMKey:    hostenv.VMKeyPath(stateDir, alloc),
		VMKeyPub: filepath.Join(stateDir, "vmkeys", alloc+".pub"),
		Overlay:  filepath.Join(stateDir, "disks", alloc+".qcow2"),
	}
}

var (
	// allocIDRE: allocation ids name files, domains and the VM's host
	// name, so they must be a DNS label without dots or slashes.
	allocIDRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	pciRE       = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	imageNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

func checkAllocationID(id string) error {
	if !allocIDRE.MatchString(id) {
		return fmt.Errorf("%w: allocation id %q", ErrInvalidParams, id)
	}
	return nil
}

// checkSlots validates the device names of slots, which become sysfs
// paths, libvirt host devices and disk sources.
func checkSlots(slots []api.Slot) error {
	for i, s := range slots {
		if !pciRE.MatchString(s.GPUPCI) {
			return fmt.Errorf("%w: slot %d: GPU PCI address %q", ErrInvalidParams, i, s.GPUPCI)
		}
		if s.FabricVF != "" && !pciRE.MatchString(s.FabricVF) {
			return fmt.Errorf("%w: slot %d: fabric VF PCI address %q", ErrInvalidParams, i, s.FabricVF)
		}
		if s.NVMe != "" && (path.Clean(s.NVMe) != s.NVMe || !strings.HasPrefix(s.NVMe, "/dev/")) {
			return fmt.Errorf("%w: slot %d: NVMe path %q: want a /dev path", ErrInvalidParams, i, s.NVMe)
		}
	}
	return nil
}

// lease is the host's record of which devices an allocation holds.
type lease struct {
	AllocationID string    `json:"allocation_id"`
	GPUs         []string  `json:"gpus"`
	NVMe         []string  `json:"nvme,omitempty"`
	FabricVFs    []string  `json:"fabric_vfs,omitempty"`
	LeasedAt     time.Time `json:"leased_at"`
}

func (l lease) devices() []string { return slices.Concat(l.GPUs, l.NVMe, l.FabricVFs) }

func leaseOf(alloc string, slots []api.Slot, now time.Time) lease {
	l := lease{AllocationID: alloc, LeasedAt: now.UTC()}
	for _, s := range slots {
		l.GPUs = append(l.GPUs, s.GPUPCI)
		if s.NVMe != "" {
			l.NVMe = append(l.NVMe, s.NVMe)
		}
		if s.FabricVF != "" {
			l.FabricVFs = append(l.FabricVFs, s.FabricVF)
		}
	}
	return l
}

// leaseMu makes checking the other leases and writing one a single step
// within hostd, the only writer of the lease directory.
var leaseMu sync.Mutex

// acquireLease writes alloc's lease unless one of its devices is in
// another allocation's lease. Its own lease (from an earlier attempt) is
// replaced.
func acquireLease(dir string, l lease) error {
	leaseMu.Lock()
	defer leaseMu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	held, err := leasedDevices(dir)
	if err != nil {
		return err
	}
	var taken []string
	for _, d := range l.devices() {
		if owner, ok := held[d]; ok && owner != l.AllocationID {
			taken = append(taken, fmt.Sprintf("%s (leased to %s)", d, owner))
		}
	}
	if len(taken) > 0 {
		return fmt.Errorf("%w: %s", ErrDeviceLeased, strings.Join(taken, ", "))
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFile(filepath.Join(dir, l.AllocationID+".json"), b, 0o600, fsutil.Synced)
}

// leasedDevices maps every leased device to its allocation. A lease file
// that cannot be read is an error: its devices might be in use.
func leasedDevices(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read lease %s: %w", name, err)
		}
		var l lease
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("read lease %s: %w", name, err)
		}
		owner := strings.TrimSuffix(name, ".json")
		for _, d := range l.devices() {
			out[d] = owner
		}
	}
	return out, nil
}

// driverOf is the driver a PCI function is bound to per sysfs, "" when
// unbound or absent.
func driverOf(env *Env, pci string) (string, error) {
	target, err := fs.ReadLink(env.Topology.Sys, "bus/pci/devices/"+pci+"/driver")
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := fs.Stat(env.Topology.Sys, "bus/pci/devices/"+pci); serr != nil {
			return "", fmt.Errorf("PCI device %s: %w", pci, serr)
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return path.Base(target), nil
}

// passthroughDevices are the GPUs and then the fabric VFs of slots.
func passthroughDevices(slots []api.Slot) []string {
	var gpus, vfs []string
	for _, s := range slots {
		gpus = append(gpus, s.GPUPCI)
		if s.FabricVF != "" {
			vfs = append(vfs, s.FabricVF)
		}
	}
	return append(gpus, vfs...)
}

// notVFIOBound lists the passthrough devices of slots that are not bound
// to vfio-pci, each with what it is bound to.
func notVFIOBound(env *Env, slots []api.Slot) ([]string, error) {
	var bad []string
	for _, pci := range passthroughDevices(slots) {
		drv, err := driverOf(env, pci)
		if err != nil {
			return nil, err
		}
		switch drv {
		case "vfio-pci":
		case "":
			bad = append(bad, pci+" (no driver)")
		default:
			bad = append(bad, pci+" ("+drv+")")
		}
	}
	return bad, nil
}
