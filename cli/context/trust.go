package context

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/trust"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

// Pins is what a context trusts, as `gpuaas context trust` shows it: key
// fingerprints, never whole keys.
type Pins struct {
	Context string `json:"context"`
	// ServerKey is the SHA256 fingerprint of controld's server key; empty
	// when nothing is pinned yet.
	ServerKey      string    `json:"server_key"`
	HostCAs        []string  `json:"host_cas"`
	RetiredHostCAs []string  `json:"retired_host_cas"`
	Gateway        string    `json:"gateway"`
	PinnedAt       time.Time `json:"pinned_at"`
	IssuedAt       time.Time `json:"issued_at"`
}

// TrustOptions are the inputs of `gpuaas context trust`.
type TrustOptions struct {
	IO       *cmdutil.IOStreams
	Config   func() (*clientconfig.Config, error)
	Active   func() (clientconfig.Active, error)
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Reset     bool
	Yes       bool
	ServerKey string
}

// NewCmdTrust builds `gpuaas context trust`; runF replaces trustRun in tests.
func NewCmdTrust(f *cmdutil.Factory, runF func(context.Context, *TrustOptions) error) *cobra.Command {
	opts := &TrustOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Show or reset what the current context trusts about its server",
		Long: `Show what the current context pinned about its server: controld's server
key, the SSH gateway's host CA keys and the gateway address. The first login
pins them (or ` + "`gpuaas context add --server-key`" + ` pins the server key
ahead); afterwards ` + "`gpuaas login`" + ` and ` + "`gpuaas ssh-config`" + ` take changes only
when they come signed by the pinned server key — a host CA rotation, a moved
gateway — and refuse anything else, changing nothing on disk.

--reset replaces the pins with what the server answers now, after showing
its fingerprints and asking (or with --yes). Compare the fingerprints with
your operator's first; --server-key makes the reset refuse any other server
key. Then run ` + "`gpuaas login`" + ` or ` + "`gpuaas ssh-config`" + ` to rewrite the SSH files.`,
		Example: `  gpuaas context trust
  gpuaas context trust --reset
  gpuaas context trust --reset --server-key SHA256:2pC0... --yes`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !opts.Reset && (opts.Yes || opts.ServerKey != "") {
				return cmdutil.FlagErrorf("--yes and --server-key go with --reset")
			}
			if opts.Reset && opts.Exporter != nil {
				return cmdutil.FlagErrorf("--json goes without --reset")
			}
			if opts.ServerKey != "" {
				if err := trust.ValidServerKey(opts.ServerKey); err != nil {
					return cmdutil.FlagErrorf("--server-key: %v", err)
				}
			}
			if opts.Reset && !opts.Yes && !opts.IO.CanPrompt() {
				return cmdutil.FlagErrorf("--reset asks for confirmation: pass --yes when not on a terminal")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return trustRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Reset, "reset", false, "Replace the pins with what the server answers now")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Reset without asking")
	cmd.Flags().StringVar(&opts.ServerKey, "server-key", "", "With --reset: the server key (`SHA256:fingerprint` or ssh-ed25519 key) to expect")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(Pins{}))
	return cmd
}

func trustRun(ctx context.Context, opts *TrustOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	active, err := opts.Active()
	if err != nil {
		return err
	}
	if opts.Reset {
		return resetTrust(ctx, opts, cfg, active)
	}
	stored, _ := cfg.Context(active.Name)
	pins := pinsOf(active.Name, stored.Trust)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, pins)
	}
	return printPins(opts.IO, pins)
}

// pinsOf describes a context's pins.
func pinsOf(name string, t *clientconfig.Trust) Pins {
	p := Pins{Context: name, HostCAs: []string{}, RetiredHostCAs: []string{}}
	if t == nil {
		return p
	}
	p.ServerKey = t.ServerKey
	if fp := trustbundle.Fingerprint(t.ServerKey); fp != "" {
		p.ServerKey = fp
	}
	for _, l := range t.HostCAs {
		p.HostCAs = append(p.HostCAs, trustbundle.Fingerprint(l))
	}
	p.RetiredHostCAs = append(p.RetiredHostCAs, t.RetiredHostCAs...)
	p.Gateway, p.PinnedAt, p.IssuedAt = t.Gateway, t.PinnedAt, t.IssuedAt
	return p
}

func printPins(ios *cmdutil.IOStreams, p Pins) error {
	if p.ServerKey == "" {
		fmt.Fprintf(ios.ErrOut, "Context %s has pinned nothing yet: its first `gpuaas login` pins the server's key\n", p.Context)
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("what", "value")
	row := func(what, value string) {
		t.AddField(what)
		t.AddField(value)
		t.EndRow()
	}
	row("server key", p.ServerKey)
	for _, fp := range p.HostCAs {
		row("host CA", fp)
	}
	for _, fp := range p.RetiredHostCAs {
		row("retired host CA", fp)
	}
	if p.Gateway != "" {
		row("gateway", p.Gateway)
	}
	if !p.PinnedAt.IsZero() {
		row("pinned at", p.PinnedAt.UTC().Format(time.RFC3339))
	}
	return t.Render()
}

// resetTrust replaces the context's pins with the server's current,
// self-consistent bundle, once the user has seen its fingerprints.
func resetTrust(ctx context.Context, opts *TrustOptions, cfg *clientconfig.Config, active clientconfig.Active) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	cas, err := client.SSHCAs(ctx)
	if err != nil {
		return fmt.Errorf("get ssh CA keys: %w", err)
	}
	d, err := trust.Check(nil, cas.Bundle, opts.Now())
	if err != nil {
		return err
	}
	next := pinsOf(active.Name, &d.Pins)
	if opts.ServerKey != "" && !matchesServerKey(opts.ServerKey, d.Pins.ServerKey) {
		return &api.Error{Code: api.CodeConflict,
			Message: fmt.Sprintf("the server answers with the server key %s, not the %s you expect", next.ServerKey, opts.ServerKey),
			Hint:    "nothing was changed; check the address of the server and the fingerprint with your operator"}
	}
	stored, _ := cfg.Context(active.Name)
	w := opts.IO.ErrOut
	if stored.Trust != nil {
		fmt.Fprintf(w, "Context %s trusts now:\n", active.Name)
		describe(w, pinsOf(active.Name, stored.Trust))
	}
	fmt.Fprintf(w, "The server at %s answers:\n", active.Server)
	describe(w, next)
	if !opts.Yes {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Trust these for context %s?", active.Name))
		if err != nil {
			return err
		}
		if !ok {
			return cmdutil.ErrCancelled
		}
	}
	pins := d.Pins
	cfg.UpdateActive(active, func(c *clientconfig.Context) { c.Trust = &pins })
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(w, "Context %s now trusts the server key %s; run `gpuaas ssh-config` (or `gpuaas login`) to rewrite the SSH files\n",
		active.Name, next.ServerKey)
	return nil
}

func describe(w io.Writer, p Pins) {
	fmt.Fprintf(w, "  server key  %s\n", p.ServerKey)
	for _, fp := range p.HostCAs {
		fmt.Fprintf(w, "  host CA     %s\n", fp)
	}
	if p.Gateway != "" {
		fmt.Fprintf(w, "  gateway     %s\n", p.Gateway)
	}
}

// matchesServerKey reports whether the server key line is the one the user
// expects (a fingerprint or a key).
func matchesServerKey(expect, line string) bool {
	fp := trustbundle.Fingerprint(line)
	return slices.Contains([]string{expect, trustbundle.Fingerprint(expect)}, fp)
}
