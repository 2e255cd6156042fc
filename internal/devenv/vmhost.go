package devenv

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/slicehost"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// `gpuaas dev --vm`: the first slice host boots real guests through
// libvirtd (qemu:///system) instead of the sim's loopback SSH servers. Its
// GPUs, slots and sysfs stay simulated, so the node declares no
// passthrough devices; guests run under TCG (this is for machines without
// usable KVM), so their timings are not production timings.

// VM images `gpuaas dev --vm-image` accepts.
const (
	VMImageMinimal = "minimal" // hostd/guestimage BuildMinimal: ~4-30 s to ready under TCG
	VMImageDebian  = "debian"  // hostd/guestimage Build: the production image, ~4 min under TCG
)

// Dev's slice network: its own, apart from a node's (gpuaas-slices) and
// the tests' (gpuaas-test-*).
const (
	devSliceNetwork = "gpuaas-dev-slices"
	devSliceBridge  = "gpuaas-dev0"
	devSliceTable   = "gpuaas_dev_slices"
)

// vmHost is what the VM slice host runs on.
type vmHost struct {
	hv       *libvirt.Hypervisor
	unlock   func() // the machine's dev --vm lock (vmlock.go)
	net      *tasks.SliceNet
	slice    *tasks.SliceHost
	imageDir string
	image    api.VMImage
	vcpus    int
	memMiB   int
	log      *slog.Logger // set once dev's network is up: close clears its guests (vmstale.go)
}

// close disconnects from libvirtd and lets another dev --vm start.
func (v *vmHost) close() error {
	if v.log != nil {
		v.clearOnStop(v.log)
	}
	err := v.hv.Close()
	v.unlock()
	return err
}

// checkVM validates Config.VM.
func checkVM(c *Config) error {
	if c.VM == "" {
		return nil
	}
	if !slices.Contains([]string{VMImageMinimal, VMImageDebian}, c.VM) {
		return fmt.Errorf("devenv: VM image %q: want %s or %s", c.VM, VMImageMinimal, VMImageDebian)
	}
	// One VM host: a second slice host would be a sim host the catalog's
	// image is not on, and slot addresses repeat from host to host.
	if c.Hosts < 1 || c.Hosts > 2 {
		return fmt.Errorf("devenv: real guests (--vm) run on one slice host: --hosts 1 or 2, got %d", c.Hosts)
	}
	return nil
}

// startVMHost finds libvirtd (or starts it, as root), builds or finds the
// guest image, and sets up the slice network and nft table.
func startVMHost(ctx context.Context, cfg Config) (*vmHost, error) {
	lockPath := vmLockPath
	if _, err := os.Stat(filepath.Dir(lockPath)); err != nil {
		lockPath = filepath.Join(os.TempDir(), filepath.Base(lockPath))
	}
	unlock, err := lockVM(lockPath, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	hv, err := connectLibvirt(ctx, cfg.Log)
	if err != nil {
		unlock()
		return nil, err
	}
	v := &vmHost{hv: hv, unlock: unlock}
	gcfg := guestimage.Config{}
	var img guestimage.Result
	switch cfg.VM {
	case VMImageDebian:
		img, err = guestimage.Build(ctx, gcfg)
		v.vcpus, v.memMiB = 1, 1024 // 1 vCPU: under TCG on a loaded machine a second one slows the boot
	default:
		img, err = guestimage.BuildMinimal(ctx, gcfg)
		v.vcpus, v.memMiB = 1, 384
	}
	if err != nil {
		v.close()
		return nil, fmt.Errorf("guest image %s: %w", cfg.VM, err)
	}
	cfg.Log.Info("guest image", "image", cfg.VM, "dir", img.Dir, "cached", img.Cached, "took", img.Took.Round(time.Millisecond))
	v.imageDir, v.image = filepath.Dir(img.Dir), api.VMImage{Name: filepath.Base(img.Dir), SHA256: img.Manifest.Disk.SHA256}
	v.net, v.slice = slicehost.Setup(ctx, hv, slicehost.Config{Network: devSliceNetwork, Bridge: devSliceBridge,
		Subnet: netip.MustParsePrefix(api.DefaultSlotSubnet), Emulate: true, Table: devSliceTable}, cfg.Log)
	if v.net == nil {
		v.close()
		return nil, fmt.Errorf("slice network for real guests: %s", v.slice.Blockers[0].Message)
	}
	v.slice.NoPassthrough = "gpuaas dev --vm: the slice host's GPUs are simulated"
	if err := v.clearStale(ctx, cfg.Log); err != nil { // what a crashed dev left (vmstale.go)
		v.close()
		return nil, err
	}
	v.log = cfg.Log
	return v, nil
}

// connectLibvirt connects to libvirtd, starting it (and virtlogd, which
// keeps the guests' serial logs) when it does not answer and this process
// is root, as scripts/deps does.
func connectLibvirt(ctx context.Context, log *slog.Logger) (*libvirt.Hypervisor, error) {
	cfg := libvirt.Config{URI: libvirt.DefaultURI, Log: log}
	hv, err := libvirt.New(ctx, cfg)
	if err == nil {
		return hv, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("libvirtd does not answer (%w): start it (sudo libvirtd -d) or run gpuaas dev --vm as root", err)
	}
	log.Info("starting libvirtd and virtlogd", "reason", err)
	for _, d := range []string{"virtlogd", "libvirtd"} {
		if exec.Command("pgrep", "-x", d).Run() == nil {
			continue
		}
		if out, err := exec.CommandContext(ctx, d, "-d").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("start %s: %w: %s", d, err, out)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if hv, err = libvirt.New(ctx, cfg); err == nil {
			return hv, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("libvirtd started but does not answer: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// catalogFor is the catalog dev seeds: with real guests the slice SKU of
// the VM host's GPUs boots the guest image, sized for TCG.
func catalogFor(v *vmHost) []api.SKU {
	skus := slices.Clone(catalog.Defaults)
	if v == nil {
		return skus
	}
	for i, s := range skus {
		if !s.WholeNode() && s.GPUModel == "H200" {
			s.VCPUsPerGPU, s.MemoryMiBPerGPU, s.Image = v.vcpus, v.memMiB, v.image
			s.Description += " (gpuaas dev --vm: a real guest, emulated)"
			skus[i] = s
		}
	}
	return skus
}

// use makes env, a sim slice host's, boot real guests: the hypervisor is
// libvirt, the guests' disks and seeds are made by the real tools (which
// the seed's choice looks for on this machine's PATH), and the rest (GPU
// telemetry, volumes) stays simulated.
// Jobs run inside the guests: hostd/env's VM environment, over SSH with
// the per-VM key, as on a real node (cli/daemon jobEnvs).
func (v *vmHost) use(env *tasks.Env, accounts hostenv.Accounts) error {
	env.Hypervisor, env.SliceNet, env.SliceHost, env.ImageDir = v.hv, v.net, v.slice, v.imageDir
	env.Runner = guestTools{sim: env.Runner}
	env.Topology.LookPath = exec.LookPath
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: env.StateDir, Accounts: accounts, Hypervisor: v.hv, Log: env.Log})
	if err != nil {
		return fmt.Errorf("job environments of the VM host: %w", err)
	}
	env.Envs = f
	return nil
}

// guestTools runs the tools that make a real guest's overlay and seed on
// this machine, and everything else with the sim's runner.
type guestTools struct{ sim host.Runner }

// realGuestTools are what vm_provision runs to make a guest's disk and seed.
var realGuestTools = []string{"qemu-img", "genisoimage", "cloud-localds"}

// Run implements host.Runner.
func (g guestTools) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if slices.Contains(realGuestTools, name) {
		return host.ExecRunner{}.Run(ctx, name, args...)
	}
	return g.sim.Run(ctx, name, args...)
}

// checkCatalog fails when the slice SKU does not boot the guest image: the
// catalog is seeded once per data directory, so one made without --vm
// keeps the sim's image.
func (v *vmHost) checkCatalog(ctx context.Context, q store.Querier) error {
	for _, s := range catalogFor(v) {
		if s.Image != v.image {
			continue
		}
		got, err := catalog.Get(ctx, q, s.ID)
		if err != nil {
			return err
		}
		if got.Image != v.image {
			return fmt.Errorf("sku %s boots image %s, not the guest image %s: this data directory was made without --vm (or with another --vm-image); start with --reset",
				s.ID, got.Image.Name, v.image.Name)
		}
	}
	return nil
}

// openStateDir lets QEMU (libvirt's own user) traverse from the data
// directory down to the VM host's state directory, where its overlays
// and seeds are (hostd/tasks guestDirs opens the rest); 0711 lists nothing.
func openStateDir(dataDir, stateDir string) error {
	rel, err := filepath.Rel(dataDir, stateDir)
	if err != nil {
		return err
	}
	d := dataDir
	for _, part := range append([]string{""}, filepath.SplitList(strings.ReplaceAll(rel, string(filepath.Separator), string(filepath.ListSeparator)))...) {
		d = filepath.Join(d, part)
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return nil
}
