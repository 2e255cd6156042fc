package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/store"
)

// InitDBOptions are the inputs of `gpuaas controld init-db`.
type InitDBOptions struct {
	IO *cmdutil.IOStreams

	// DatabaseURL is a superuser's connection, to any database.
	DatabaseURL  string
	Role         string
	Database     string
	PasswordFile string
}

// NewCmdControldInitDB builds `gpuaas controld init-db`; runF replaces
// initDBRun in tests.
func NewCmdControldInitDB(f *cmdutil.Factory, runF func(context.Context, *InitDBOptions) error) *cobra.Command {
	opts := &InitDBOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "init-db --database-url SUPERUSER-URL [--role NAME] [--database NAME]",
		Short: "Create controld's Postgres roles and database (once, as a Postgres superuser)",
		Long: `Prepare a Postgres cluster for controld, once, connected as a superuser
(or a role with CREATEROLE and CREATEDB) to any database of the cluster:

  - the role ` + store.AppRole + ` (NOLOGIN), which controld's connections act as;
  - controld's login role (--role), with LOGIN and without SUPERUSER,
    CREATEROLE or CREATEDB, a member of ` + store.AppRole + `;
  - controld's database (--database), owned by the login role.

controld then logs in as --role, applies its migrations as the schema's
owner at every start, and needs no right to create roles. With
--password-file the login role gets the password in that file (first
line); without it, authenticate it as pg_hba.conf says (peer, cert...).
Running init-db again creates nothing new (it only sets the password).`,
		Example: `  sudo -u postgres gpuaas controld init-db --database-url "postgres:///postgres?host=/run/postgresql" \
    --role gpuaas --database gpuaas --password-file /etc/gpuaas/db-password
  gpuaas controld init-db --database-url postgres://postgres@db.example.com/postgres --role gpuaas`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.DatabaseURL == "" {
				return cmdutil.FlagErrorf("--database-url is required: a Postgres superuser's connection (not controld's)")
			}
			if opts.Role == "" || opts.Database == "" {
				return cmdutil.FlagErrorf("--role and --database may not be empty")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return initDBRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.DatabaseURL, "database-url", "", "A Postgres superuser's connection string (any database of the cluster)")
	fl.StringVar(&opts.Role, "role", "gpuaas", "Login role controld connects as")
	fl.StringVar(&opts.Database, "database", "gpuaas", "controld's database")
	fl.StringVar(&opts.PasswordFile, "password-file", "", "File whose first line becomes the login role's password")
	return cmd
}

func initDBRun(ctx context.Context, opts *InitDBOptions) error {
	cfg := store.InitDBConfig{LoginRole: opts.Role, Database: opts.Database}
	if opts.PasswordFile != "" {
		b, err := os.ReadFile(opts.PasswordFile)
		if err != nil {
			return cmdutil.FlagErrorf("--password-file: %v", err)
		}
		cfg.Password, _, _ = strings.Cut(string(b), "\n")
		if cfg.Password == "" {
			return cmdutil.FlagErrorf("--password-file %s is empty", opts.PasswordFile)
		}
	}
	conn, err := pgx.Connect(ctx, opts.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect as the superuser: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	res, err := store.InitDB(ctx, conn, cfg)
	if errors.Is(err, store.ErrInitDBRights) {
		return fmt.Errorf("%w\nrun init-db as a Postgres superuser (e.g. the postgres role: sudo -u postgres gpuaas controld init-db ...), or grant this role CREATEROLE and CREATEDB", err)
	}
	if err != nil {
		return err
	}
	say := func(did bool, what string) {
		verb := "exists"
		if did {
			verb = "created"
		}
		fmt.Fprintf(opts.IO.ErrOut, "%-40s %s\n", what, verb)
	}
	say(res.CreatedAppRole, "role "+store.AppRole+" (nologin)")
	say(res.CreatedLoginRole, "login role "+opts.Role+" (no createrole)")
	say(res.CreatedDatabase, "database "+opts.Database+" (owner "+opts.Role+")")
	if res.SetPassword {
		fmt.Fprintf(opts.IO.ErrOut, "%-40s set\n", "password of "+opts.Role)
	}
	fmt.Fprintf(opts.IO.ErrOut, "controld connects as %s to database %s (--database-url / GPUAAS_DATABASE_URL).\n", opts.Role, opts.Database)
	return nil
}

// roleSetupHint adds what to do to a migration refused for want of the
// one-time init-db.
func roleSetupHint(err error) error {
	if errors.Is(err, store.ErrRoleSetup) {
		return fmt.Errorf("%w\nrun `gpuaas controld init-db` once as a Postgres superuser: it creates %s and makes controld's login role a member (docs/operators.md)", err, store.AppRole)
	}
	return err
}
