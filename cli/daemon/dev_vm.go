package daemon

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/internal/devenv"
)

// devVMFlags are `gpuaas dev --vm [--vm-image minimal|debian]`: the first
// slice host boots real guests through libvirtd (internal/devenv vmhost.go).
type devVMFlags struct {
	On    bool
	Image string
}

func (v *devVMFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&v.On, "vm", false,
		"The slice host boots real guests through libvirtd (started if it does not answer, as root), emulated (TCG): ssh <alloc>@localhost lands in the guest")
	fl.StringVar(&v.Image, "vm-image", devenv.VMImageMinimal,
		"With --vm: the guest image, minimal (seconds to ready under TCG) or debian (the production image, minutes)")
}

// apply checks the flags and sets cfg.VM.
func (v *devVMFlags) apply(cfg *devenv.Config, imageChanged bool) error {
	if !v.On {
		if imageChanged {
			return fmt.Errorf("--vm-image needs --vm")
		}
		return nil
	}
	if !slices.Contains([]string{devenv.VMImageMinimal, devenv.VMImageDebian}, v.Image) {
		return fmt.Errorf("--vm-image must be %s or %s, got %q", devenv.VMImageMinimal, devenv.VMImageDebian, v.Image)
	}
	if cfg.Hosts < 1 || cfg.Hosts > 2 {
		return fmt.Errorf("--vm runs real guests on one slice host: --hosts 1 or 2, got %d", cfg.Hosts)
	}
	cfg.VM = v.Image
	return nil
}

// printVMBanner says that guests are real but emulated.
func printVMBanner(w io.Writer, cfg devenv.Config) {
	if cfg.VM == "" {
		return
	}
	fmt.Fprintln(w, describe("guests", fmt.Sprintf("real VMs (%s image) on sim-slice-1 through libvirtd, EMULATED (TCG):", cfg.VM)))
	fmt.Fprintln(w, describe("", "boot and run times are not production timings; `virsh list --all` shows them"))
}
