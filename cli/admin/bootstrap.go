package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BootstrapOptions are the inputs of `gpuaas admin bootstrap`.
type BootstrapOptions struct {
	IO       *cmdutil.IOStreams
	Exporter cmdutil.Exporter

	DatabaseURL string
	Email       string
	Name        string
	Reissue     bool
}

// BootstrapResult is what `gpuaas admin bootstrap --json` prints.
type BootstrapResult struct {
	Admin  api.User   `json:"admin"`
	Invite api.Invite `json:"invite"`
}

// NewCmdBootstrap builds `gpuaas admin bootstrap`; runF replaces bootstrapRun in tests.
func NewCmdBootstrap(f *cmdutil.Factory, runF func(context.Context, *BootstrapOptions) error) *cobra.Command {
	opts := &BootstrapOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "bootstrap --database-url URL --email EMAIL [--name NAME]",
		Short: "Create the first admin of a new installation (run once, next to controld)",
		Long: `Create the first admin of an installation and print their one-time invite
code. Run it once, on a machine that reaches controld's Postgres database,
with the same database URL as controld (--database-url, or
GPUAAS_DATABASE_URL): it talks to the database directly, because the API
needs an admin to add one. It applies controld's migrations first, so it
may run before controld ever started, and it refuses when any admin exists
already. Nothing is sent over the network but to the database.

The admin is created without a password. On their own machine they point
a CLI context at the server and redeem the code, which sets their
password and logs them in:

  gpuaas context add prod --server nats://controld.example.com:4222 --use
  gpuaas login --invite CODE

The code is valid for 7 days and shown only once; only its hash is
stored. If it is lost or expires before it is used, run bootstrap again
with the same --email and --reissue: it replaces the code, as long as that
admin never set a password and no other admin exists. Bootstraps are
recorded in the audit log with the actor "bootstrap".

` + "`gpuaas dev`" + ` needs none of this: it seeds admin@localhost itself.`,
		Example: `  gpuaas admin bootstrap --database-url postgres://gpuaas@db/gpuaas --email root@example.com
  GPUAAS_DATABASE_URL=postgres://gpuaas@db/gpuaas gpuaas admin bootstrap --email root@example.com --json invite --jq .invite.code`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.DatabaseURL == "" {
				opts.DatabaseURL = os.Getenv("GPUAAS_DATABASE_URL")
			}
			if opts.DatabaseURL == "" {
				return cmdutil.FlagErrorf("--database-url (or GPUAAS_DATABASE_URL) is required: controld's Postgres database")
			}
			if opts.Email = strings.TrimSpace(opts.Email); opts.Email == "" {
				return cmdutil.FlagErrorf("--email is required: the first admin's email address")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return bootstrapRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DatabaseURL, "database-url", "", "controld's Postgres connection string (default $GPUAAS_DATABASE_URL)")
	cmd.Flags().StringVar(&opts.Email, "email", "", "Email of the first admin (required)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "Display name of the first admin")
	cmd.Flags().BoolVar(&opts.Reissue, "reissue", false, "Replace the unused invite of the first admin (--email) instead")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(BootstrapResult{}))
	return cmd
}

func bootstrapRun(ctx context.Context, opts *BootstrapOptions) error {
	res, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: opts.DatabaseURL, Email: opts.Email, Name: opts.Name,
		Reissue: opts.Reissue})
	if errors.Is(err, store.ErrRoleSetup) {
		return fmt.Errorf("%w\nrun `gpuaas controld init-db` once as a Postgres superuser first (docs/operators.md)", err)
	}
	if err != nil {
		return err
	}
	out := BootstrapResult{Admin: res.Admin, Invite: res.Invite}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, out)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%s\t%s\t%s\t%s\n", out.Admin.Email, out.Admin.ID, out.Invite.Code,
			out.Invite.ExpiresAt.UTC().Format(time.RFC3339))
		return err
	}
	verb := "Created the first admin"
	if opts.Reissue {
		verb = "New invite for the first admin"
	}
	_, err = fmt.Fprintf(opts.IO.Out, `%s, %s (%s).
Invite code, shown only this once, valid until %s:

  %s

On the admin's machine, point a context at this server and redeem it:

  gpuaas context add NAME --server NATS_URL --use
  gpuaas login --invite %s
`, verb, out.Admin.Email, out.Admin.ID, out.Invite.ExpiresAt.Local().Format(time.DateTime), opts.IO.ColorScheme().Bold(out.Invite.Code), out.Invite.Code)
	return err
}
