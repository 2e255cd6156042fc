package volume

import (
	"os"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCreateDryRunAgainstControld: `volume create --dry-run` shows the
// price per month and per hour, piped as one row, and makes nothing.
func TestCreateDryRunAgainstControld(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	run := func(tty bool, args ...string) string {
		t.Helper()
		ios, _, out, _ := cmdutil.Test()
		ios.SetStdoutTTY(tty)
		f := &cmdutil.Factory{IOStreams: ios, Client: func() (*api.Client, error) { return c, nil }}
		cmd := NewCmdCreate(f, nil)
		cmd.SetArgs(args)
		if _, err := cmd.ExecuteC(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	// 1 TiB at $0.10 per GiB-month: 10240 cents a month, 10240/730 an hour.
	out := run(true, "ckpt", "--size", "1T", "--node", "sim-h100-1", "--dry-run")
	for _, want := range []string{"Volume ckpt of 1T would be made on sim-h100-1.",
		"It would cost $102.40 a month (730 hours), $0.1403 an hour, at $0.10 per GiB-month"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run said\n%s\nwant it to contain %q", out, want)
		}
	}
	if out := run(false, "ckpt", "--size", "1T", "--node", "sim-h100-1", "--dry-run"); out != "ckpt\tsim-h100-1\t1099511627776\t10\t10240\t14.0274\tusd\n" {
		t.Errorf("piped dry run %q", out)
	}
	if out := run(false, "ckpt", "--size", "1T", "--node", "sim-h100-1", "--dry-run", "--json", "price_per_month_minor,price_per_hour_minor"); !strings.HasPrefix(out, `{"price_per_hour_minor":14.027`) {
		t.Errorf("json dry run %q", out)
	}
	if list, err := c.VolumeList(t.Context(), api.VolumeListRequest{}); err != nil || len(list.Volumes) != 0 {
		t.Errorf("after dry runs: %+v, %v; want no volume", list, err)
	}
}

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
