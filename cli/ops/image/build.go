package image

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/hostd/guestimage"
)

// BuildOptions are the inputs of `gpuaas ops image build`.
type BuildOptions struct {
	IO       *cmdutil.IOStreams
	Out      string
	CacheDir string
	Suite    string
	Mirror   string
	Force    bool
	Verbose  bool
	// NVIDIA builds the variant with Debian's NVIDIA driver (DKMS).
	NVIDIA bool
}

// NewCmdBuild builds `gpuaas ops image build`; runF replaces buildRun in tests.
func NewCmdBuild(f *cmdutil.Factory, runF func(context.Context, *BuildOptions) error) *cobra.Command {
	opts := &BuildOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "build --out DIR",
		Short: "Build (or reuse) the slice guest image from Debian packages",
		Long: `Build the guest image slice VMs boot: a small Debian system made with
debootstrap (minbase, the cloud kernel, systemd, openssh-server, cloud-init,
systemd-networkd), the readiness unit that writes ` + guestimage.ReadyMarker + `
after cloud-init and the driver check, and the driver check itself
(` + guestimage.DriverCheck + `: the GPU count from the NoCloud seed's
` + guestimage.MetaGPUs + ` against nvidia-smi -L; the seed can force it to fail).

The result is a directory with ` + guestimage.DiskFile + ` (one ext4 filesystem, no
partition table), the kernel and initrd for direct kernel boot, and
` + guestimage.ManifestFile + ` with the SHA-256 of each; hostd refuses an image
whose files do not match it.

Images are cached by their inputs under --cache-dir/images (and packages
under --cache-dir/apt): a second build with the same inputs reuses the image
unless --force is given. Building needs root (debootstrap, chroot) and the
debootstrap, e2fsprogs and qemu-utils packages.

--nvidia builds the variant GPU slices need: Debian's NVIDIA driver from the
mirror's non-free component (nvidia-kernel-dkms, nvidia-smi,
firmware-nvidia-gsp), its kernel module built by DKMS for the image's own
kernel, on a ` + guestimage.NVIDIADiskSize + ` disk. It is cached apart from the plain image; a cold
build takes many minutes (the module is compiled). The manifest's "driver"
names the driver and the module.`,
		Example: `  sudo gpuaas ops image build --out /var/lib/gpuaas/images/slice
  sudo gpuaas ops image build --nvidia --out /var/lib/gpuaas/images/slice-nvidia`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Out == "" {
				return cmdutil.FlagErrorf("--out is required")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return buildRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "Directory that receives the image and its manifest")
	cmd.Flags().StringVar(&opts.CacheDir, "cache-dir", guestimage.DefaultCacheDir, "Cache of packages and built images")
	cmd.Flags().StringVar(&opts.Suite, "suite", guestimage.DefaultSuite, "Debian suite to install")
	cmd.Flags().StringVar(&opts.Mirror, "mirror", guestimage.DefaultMirror, "Debian mirror debootstrap installs from")
	cmd.Flags().BoolVar(&opts.NVIDIA, "nvidia", false, "Build the variant with Debian's NVIDIA driver (module built by DKMS for the image's kernel)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "Rebuild even when the cache has the image")
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show debootstrap's and the other tools' output")
	return cmd
}

func buildRun(ctx context.Context, opts *BuildOptions) error {
	log := io.Discard
	if opts.Verbose {
		log = opts.IO.ErrOut
	}
	fmt.Fprintf(opts.IO.ErrOut, "building the guest image (debootstrap %s; minutes when cold)...\n", opts.Suite)
	res, err := guestimage.Build(ctx, guestimage.Config{
		Out: opts.Out, CacheDir: opts.CacheDir, Suite: opts.Suite, Mirror: opts.Mirror,
		Force: opts.Force, Log: log, NVIDIADriver: opts.NVIDIA,
	})
	if err != nil {
		return err
	}
	how := "built"
	if res.Cached {
		how = "reused the cached image"
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s in %.1fs\n", how, res.Took.Seconds())
	if res.Manifest.Driver != "" {
		fmt.Fprintf(opts.IO.ErrOut, "driver: %s\n", res.Manifest.Driver)
	}
	m := res.Manifest
	fmt.Fprintf(opts.IO.Out, "%s\n", res.Dir)
	for _, f := range []guestimage.File{m.Disk, m.Kernel, m.Initrd} {
		fmt.Fprintf(opts.IO.Out, "%s\tsha256:%s\t%d\n", f.Name, f.SHA256, f.Size)
	}
	return nil
}
