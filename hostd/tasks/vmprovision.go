package tasks

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Phases of slice.vm_provision, in order.
const (
	PhaseLease       = "lease"
	PhaseVFIOCheck   = "vfio_bind_check"
	PhaseImageVerify = "image_verify"
	PhaseSeed        = "seed"
	PhaseDefineStart = "define_start"
	PhaseReadiness   = "readiness"
)

// ProvisionPhases lists the phases of slice.vm_provision in order.
var ProvisionPhases = []string{PhaseGPUCheck, PhaseLease, PhaseVFIOCheck, PhaseImageVerify, PhaseSeed, PhaseDefineStart, PhaseReadiness}

// vmProvision boots a slice VM with the slots' GPUs, VFs and NVMe
// namespaces. Each phase registers an undo before it runs, so a failure
// anywhere leaves no lease, seed, VM key, overlay or domain behind.
func (c Config) vmProvision(ctx context.Context, env *Env, p hostproto.VMProvisionParams, rep Reporter) (any, error) {
	keys, err := checkProvision(p)
	if err != nil {
		return nil, err
	}
	if err := sliceHostReady(env); err != nil {
		return nil, err
	}
	paths := PathsFor(env.StateDir, p.AllocationID)
	name := p.AllocationID
	ph := NewPhased(env, rep)

	err = ph.Run(ctx, PhaseGPUCheck, func(context.Context) error {
		gpus := make([]string, len(p.Slots))
		for i, s := range p.Slots {
			gpus[i] = s.GPUPCI
		}
		return checkGPUs(env, gpus)
	}, nil)
	if err != nil {
		return nil, err
	}

	err = ph.Run(ctx, PhaseLease, func(context.Context) error {
		return acquireLease(filepath.Dir(paths.Lease), leaseOf(p.AllocationID, p.Slots, env.Now()))
	}, func(context.Context) error { return removeLease(paths.Lease) })
	if err != nil {
		return nil, err
	}

	if noPassthrough(env) != "" {
		skipPhase(rep, PhaseVFIOCheck, noPassthrough(env))
	} else {
		err = ph.Run(ctx, PhaseVFIOCheck, func(context.Context) error {
			bad, err := notVFIOBound(env, p.Slots)
			if err != nil {
				return err
			}
			if len(bad) > 0 {
				return fmt.Errorf("%w: %s", ErrNotVFIOBound, strings.Join(bad, ", "))
			}
			return nil
		}, nil)
	}
	if err != nil {
		return nil, err
	}

	base := filepath.Join(env.ImageDir, p.Image.Name+".img")
	// boot is set when the image is a guest image directory (hostd/guestimage:
	// a disk with no bootloader, booted with its own kernel and initrd).
	var boot *guestimage.Image
	err = ph.Run(ctx, PhaseImageVerify, func(ctx context.Context) error {
		dir := filepath.Join(env.ImageDir, p.Image.Name)
		if _, err := os.Stat(filepath.Join(dir, guestimage.ManifestFile)); err == nil {
			img, err := verifyGuestImage(dir, p.Image.SHA256)
			if err != nil {
				return err
			}
			base, boot = img.Disk, &img
			return nil
		}
		return verifyImage(ctx, base, p.Image.SHA256)
	}, nil)
	if err != nil {
		return nil, err
	}

	var lent []lentVolume
	if len(p.Volumes) > 0 {
		err = ph.Run(ctx, PhaseVolumeLend, func(ctx context.Context) error {
			lent, err = lendVolumes(ctx, env, name, p.Volumes)
			return err
		}, func(ctx context.Context) error {
			_, err := returnVolumes(ctx, env, name)
			return err
		})
		if err != nil {
			return nil, err
		}
	}

	err = ph.Run(ctx, PhaseSeed, func(ctx context.Context) error {
		return writeSeed(ctx, env, p, keys, paths)
	}, func(context.Context) error {
		return errors.Join(os.RemoveAll(paths.SeedDir), removeIfExists(paths.VMKey), removeIfExists(paths.VMKeyPub))
	})
	if err != nil {
		return nil, err
	}

	err = ph.Run(ctx, PhaseDefineStart, func(ctx context.Context) error {
		return defineStart(ctx, env, p, base, boot, paths, lent)
	}, func(ctx context.Context) error {
		return errors.Join(teardownDomain(ctx, env, name), releaseSlicePort(ctx, env, p.Slots[0].MAC),
			removeIfExists(paths.Overlay))
	})
	if err != nil {
		return nil, err
	}

	var addr string
	var check *api.DriverCheck
	err = ph.Run(ctx, PhaseReadiness, func(ctx context.Context) error {
		a, err := c.waitReady(ctx, env, name, p.Slots[0].IP)
		addr = a
		if err != nil {
			return err
		}
		// The sim's guests (an Addresser: SSH servers on loopback) boot
		// no image and write no marker: hostd runs their nvidia-smi -L
		// itself (drivercheck.go).
		if _, sim := env.Hypervisor.(Addresser); sim {
			check, err = simGuestDriverCheck(ctx, addr, p.PosixUser, paths.VMKey)
			return err
		}
		// A guest booted from a guest image (hostd/guestimage) promises the
		// marker: ready only once its driver check passed (vmready.go),
		// with the GPUs it listed. Any other guest reports no check, and
		// controld refuses it (fail closed).
		if boot == nil {
			return nil
		}
		marker, err := c.waitMarker(ctx, addr, p.PosixUser, paths.VMKey, serialLogPath(paths))
		if err == nil {
			check = parseDriverMarker(marker)
		}
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return hostproto.VMProvisionResult{Domain: name, Address: addr, DriverCheck: check}, nil
}

// checkProvision validates the params and returns the renter's keys in
// normal form.
func checkProvision(p hostproto.VMProvisionParams) ([]string, error) {
	if err := checkAllocationID(p.AllocationID); err != nil {
		return nil, err
	}
	if err := host.CheckUserName(p.PosixUser); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	if len(p.Slots) == 0 {
		return nil, fmt.Errorf("%w: no slots", ErrInvalidParams)
	}
	if err := checkSlots(p.Slots); err != nil {
		return nil, err
	}
	for i, s := range p.Slots {
		if err := checkGPUUUID(s.GPUUUID); err != nil {
			return nil, fmt.Errorf("slot %d: %w", i, err)
		}
	}
	if err := checkMAC(p.Slots[0].MAC); err != nil {
		return nil, err
	}
	if _, err := slotNetwork(p.Slots[0].IP); err != nil {
		return nil, err
	}
	if p.VCPUs <= 0 || p.MemoryMiB <= 0 {
		return nil, fmt.Errorf("%w: %d vCPUs, %d MiB of memory", ErrInvalidParams, p.VCPUs, p.MemoryMiB)
	}
	if !imageNameRE.MatchString(p.Image.Name) {
		return nil, fmt.Errorf("%w: image name %q", ErrInvalidParams, p.Image.Name)
	}
	if err := checkVMVolumes(p.Volumes); err != nil {
		return nil, err
	}
	return normalizeKeys(p.SSHKeys)
}

// verifyImage checks the base image against its pinned SHA-256.
func verifyImage(ctx context.Context, file, want string) error {
	want = strings.ToLower(strings.TrimSpace(want))
	if len(want) != sha256.Size*2 {
		return fmt.Errorf("%w: no valid sha256 pinned for %s (got %q)", ErrImageChecksum, filepath.Base(file), want)
	}
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", ErrImageMissing, file)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return fmt.Errorf("hash %s: %w", file, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: %s has sha256 %s; want %s", ErrImageChecksum, file, got, want)
	}
	return nil
}

// verifyGuestImage checks a guest image directory: the disk's digest
// must be the pinned one, and every file must match the manifest.
func verifyGuestImage(dir, want string) (guestimage.Image, error) {
	want = strings.ToLower(strings.TrimSpace(want))
	if len(want) != sha256.Size*2 {
		return guestimage.Image{}, fmt.Errorf("%w: no valid sha256 pinned for %s (got %q)", ErrImageChecksum, filepath.Base(dir), want)
	}
	m, err := guestimage.ReadManifest(dir)
	if err != nil {
		return guestimage.Image{}, fmt.Errorf("%w: %w", ErrImageMissing, err)
	}
	if m.Disk.SHA256 != want {
		return guestimage.Image{}, fmt.Errorf("%w: %s's manifest records disk sha256 %s; want %s", ErrImageChecksum, dir, m.Disk.SHA256, want)
	}
	img, err := guestimage.Verify(dir)
	if err != nil {
		return guestimage.Image{}, fmt.Errorf("%w: %w", ErrImageChecksum, err)
	}
	return img, nil
}

// ctxReader stops a long read (hashing a multi-GB image) when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// defineStart makes the boot overlay and defines and starts the domain.
// A domain of the same name left by an interrupted attempt goes first.
func defineStart(ctx context.Context, env *Env, p hostproto.VMProvisionParams, base string, boot *guestimage.Image, paths SlicePaths, lent []lentVolume) error {
	if err := teardownDomain(ctx, env, p.AllocationID); err != nil {
		return fmt.Errorf("remove leftover domain: %w", err)
	}
	if err := guestDirs(filepath.Dir(paths.Overlay)); err != nil {
		return err
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return err
	}
	if _, err := env.Runner.Run(ctx, "qemu-img", "create", "-f", "qcow2", "-F", "qcow2", "-b", base, paths.Overlay); err != nil {
		return fmt.Errorf("create overlay: %w", err)
	}
	spec, err := domainSpec(env, p, paths)
	if err != nil {
		return err
	}
	spec.Disks = append(spec.Disks, volumeDisks(lent, len(spec.Disks))...)
	if boot != nil {
		spec.Kernel, spec.Initrd, spec.Cmdline = boot.Kernel, boot.Initrd, boot.Manifest.Cmdline
		if spec.SerialLog, err = filepath.Abs(serialLogPath(paths)); err != nil {
			return err
		}
	}
	if err := env.Hypervisor.Define(ctx, spec); err != nil {
		return err
	}
	if err := env.Hypervisor.Start(ctx, spec.Name); err != nil {
		return err
	}
	// The tap exists once the domain runs; until its port is pinned the
	// network's port isolation alone keeps the VM apart.
	return registerSlicePort(ctx, env, spec.MAC, p.Slots[0].IP)
}

// domainSpec is the VM: pinned to the slots' NUMA node when they share
// one, the GPUs and VFs passed through, the overlay as vda and each slot's
// NVMe namespace raw after it.
func domainSpec(env *Env, p hostproto.VMProvisionParams, paths SlicePaths) (host.DomainSpec, error) {
	overlay, err := filepath.Abs(paths.Overlay)
	if err != nil {
		return host.DomainSpec{}, err
	}
	seed, err := filepath.Abs(paths.SeedISO)
	if err != nil {
		return host.DomainSpec{}, err
	}
	spec := host.DomainSpec{
		Name: p.AllocationID, VCPUs: p.VCPUs, MemoryMiB: p.MemoryMiB, NUMANode: p.Slots[0].NUMANode,
		Disks:   []host.Disk{{Source: overlay, Target: "vda"}},
		SeedISO: seed, MAC: strings.ToLower(p.Slots[0].MAC), Network: sliceNetwork(env),
	}
	for _, s := range p.Slots {
		// Without passthrough the slots' NUMA node says nothing of the
		// guest's devices (and a simulated topology's CPUs are not this
		// machine's): no pinning.
		if s.NUMANode != spec.NUMANode || s.NUMANode < 0 || noPassthrough(env) != "" {
			spec.NUMANode = -1
		}
	}
	if spec.NUMANode >= 0 {
		b, err := fs.ReadFile(env.Topology.Sys, fmt.Sprintf("devices/system/node/node%d/cpulist", spec.NUMANode))
		if err != nil {
			return host.DomainSpec{}, fmt.Errorf("CPUs of NUMA node %d: %w", spec.NUMANode, err)
		}
		spec.CPUSet = strings.TrimSpace(string(b))
	}
	spec.Emulate = emulated(env)
	if noPassthrough(env) != "" {
		// No device of the slots is handed to the guest (vmhost.go).
		return spec, nil
	}
	for _, d := range passthroughDevices(p.Slots) {
		spec.HostDevs = append(spec.HostDevs, host.PCIAddress(d))
	}
	for _, s := range p.Slots {
		if s.NVMe != "" {
			spec.Disks = append(spec.Disks, host.Disk{Source: s.NVMe, Target: diskTarget(len(spec.Disks)), Raw: true})
		}
	}
	return spec, nil
}

// diskTarget is the i-th virtio disk name: vda, vdb, ..., vdz, vdaa.
func diskTarget(i int) string {
	if i < 26 {
		return "vd" + string(rune('a'+i))
	}
	return "vd" + string(rune('a'+i/26-1)) + string(rune('a'+i%26))
}

// teardownDomain powers the domain off and undefines it; a domain that
// does not exist or is not running is fine.
func teardownDomain(ctx context.Context, env *Env, name string) error {
	if err := env.Hypervisor.Destroy(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
		return err
	}
	if err := env.Hypervisor.Undefine(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
		return err
	}
	return nil
}

// Addresser is implemented by hypervisors that know where a VM's sshd
// listens (the sim's guests listen on loopback ports); a real VM is
// reached at its slot IP, port 22.
// It is the environment's (hostenv.Addresser), which reaches VMs the same way.
type Addresser = hostenv.Addresser

// VMAddress is where the sshd of the VM of domain name listens.
func VMAddress(ctx context.Context, env *Env, name, slotIP string) (string, error) {
	if a, ok := env.Hypervisor.(Addresser); ok {
		return a.Address(ctx, name)
	}
	ip, _, _ := strings.Cut(slotIP, "/")
	return net.JoinHostPort(ip, "22"), nil
}

// waitReady polls until the VM's sshd sends its banner. A domain that
// stops running meanwhile fails at once.
func (c Config) waitReady(ctx context.Context, env *Env, name, slotIP string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.ReadinessTimeout)
	defer cancel()
	var addr string
	var last error
	err := poll(ctx, c.PollInterval, func() (bool, error) {
		st, err := env.Hypervisor.State(ctx, name)
		if err != nil {
			last = err
			return false, nil
		}
		if st != host.DomainRunning {
			return false, fmt.Errorf("%w: domain is %s", ErrNotReady, st)
		}
		if addr, err = VMAddress(ctx, env, name, slotIP); err == nil {
			err = sshBanner(ctx, addr)
		}
		last = err
		return err == nil, nil
	})
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("%w: no SSH banner within %s: %w", ErrNotReady, c.ReadinessTimeout, last)
	}
	return addr, err
}

// sshBanner connects to addr and reads the SSH identification line.
func sshBanner(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// RFC 4253 §4.2: the server may send other lines before its version.
	r := bufio.NewReaderSize(conn, 256)
	for range 10 {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "SSH-") {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read SSH banner from %s: %w", addr, err)
		}
	}
	return fmt.Errorf("no SSH banner from %s", addr)
}
