package volumeprice

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/cli/volume"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

func TestNewCmdSet(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		want     int64
		currency string
		wantErr  string
	}{
		{args: []string{"0.12"}, want: 12, currency: "usd"},
		{args: []string{"1", "--currency", "eur"}, want: 100, currency: "eur"},
		{args: []string{"0"}, want: 0, currency: "usd"},
		{args: []string{"0.125"}, wantErr: "at most two decimals"},
		{args: []string{"--", "-1"}, wantErr: "negative"},
		{args: []string{"1.5X"}, wantErr: "not an amount"},
		{args: nil, wantErr: "price per GiB-month"},
	} {
		ios, _, _, _ := cmdutil.Test()
		var got *SetOptions
		err := cmdtest.Execute(NewCmdSet(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *SetOptions) error { got = o; return nil }), tt.args...)
		if tt.wantErr != "" {
			var fe *cmdutil.FlagError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: %v; want a usage error saying %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.PriceMinor != tt.want || got.Currency != tt.currency {
			t.Errorf("%q: %+v, %v; want %d %s", tt.args, got, err, tt.want, tt.currency)
		}
	}
}

// TestSetAgainstControld: the price an admin sets is the one `volume
// create --dry-run` shows; setting it again says nothing changed; another
// currency is refused with the reason.
func TestSetAgainstControld(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	run := func(cmd func(f *cmdutil.Factory) *cobra.Command, args ...string) (string, error) {
		t.Helper()
		ios, _, out, _ := cmdutil.Test()
		ios.SetStdoutTTY(true)
		f := &cmdutil.Factory{IOStreams: ios, Client: func() (*api.Client, error) { return c, nil }}
		err := cmdtest.Execute(cmd(f), args...)
		return out.String(), err
	}
	set := func(f *cmdutil.Factory) *cobra.Command { return NewCmdSet(f, nil) }
	create := func(f *cmdutil.Factory) *cobra.Command { return volume.NewCmdCreate(f, nil) }
	if out, err := run(set, "0.12"); err != nil || out != "A GiB of volume now costs $0.12 a month (was $0.10); volumes being charged keep their price until resized\n" {
		t.Fatalf("set: %q, %v", out, err)
	}
	if out, err := run(create, "ckpt", "--size", "100G", "--node", "sim-h100-1", "--dry-run"); err != nil ||
		!strings.Contains(out, "It would cost $12.00 a month (730 hours)") || !strings.Contains(out, "at $0.12 per GiB-month") {
		t.Errorf("dry run after the change said %q, %v", out, err)
	}
	if out, err := run(set, "0.12"); err != nil || out != "A GiB of volume already costs $0.12 a month; nothing changed\n" {
		t.Errorf("set again: %q, %v", out, err)
	}
	if _, err := run(set, "0.2", "--currency", "eur"); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "charged in usd") {
		t.Errorf("eur: %v; want invalid_argument saying volumes are charged in usd", err)
	}
}
