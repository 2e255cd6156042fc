package image

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// ImportOptions are the inputs of `gpuaas image import`.
type ImportOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Name         string
	File         string
	Registry     string
	RegistryAuth string
	Platform     bool
}

// NewCmdImport builds `gpuaas image import`; runF replaces importRun in
// tests.
func NewCmdImport(f *cmdutil.Factory, runF func(context.Context, *ImportOptions) error) *cobra.Command {
	opts := &ImportOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Push an image archive to the registry and publish it",
		Long: `Push an image archive — docker save's, or an OCI layout in a tar (podman save
--format oci-archive) — from this machine to the registry controld verifies
against, by digest, then publish it as NAME (unverified), as publish does.

The registry is the one controld names, unless --registry says another; a
registry with credentials wants --registry-auth FILE, a JSON file
{"username": "…", "password": "…"}.`,
		Example: `  gpuaas image import tool ./tool.tar
  gpuaas image import jupyter ./jupyter.oci.tar --platform`,
		Args: cmdutil.ExactArgs(2, "a name and an archive file"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name, opts.File = args[0], args[1]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return importRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Registry, "registry", "", "push to this registry (`HOST:PORT`; default: controld's)")
	cmd.Flags().StringVar(&opts.RegistryAuth, "registry-auth", "", "the registry's credentials (a JSON `FILE`)")
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "publish for every project (operators)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Image{}))
	return cmd
}

func importRun(ctx context.Context, opts *ImportOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	addr := opts.Registry
	if addr == "" {
		r, err := client.ImageRegistry(ctx)
		if err != nil {
			return err
		}
		if r.Registry == "" {
			return api.Errorf(api.CodeUnavailable, "controld has no registry configured").
				WithHint("pass --registry HOST:PORT, or configure controld's registry")
		}
		addr = r.Registry
	}
	reg, err := registry.New(registry.Settings{Addr: addr, CredentialsFile: opts.RegistryAuth})
	if err != nil {
		return err
	}
	img, done, err := registry.ReadArchive(opts.File)
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(opts.IO.ErrOut, "Pushing %s to %s\n", opts.File, addr)
	ref, err := reg.Push(ctx, "gpuaas/"+opts.Name, img)
	if err != nil {
		return err
	}
	out, err := client.ImagePublish(ctx, api.ImagePublishRequest{Name: opts.Name, Ref: ref, Platform: opts.Platform})
	if err != nil {
		return err
	}
	return reportImage(ctx, opts.IO, opts.Exporter, opts.Now(), *out, fmt.Sprintf("Imported %s as %s (%s)", opts.File, out.Ref, out.Trust))
}
