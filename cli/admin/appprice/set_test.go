package appprice

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// TestNewCmdSet: the price is parsed as money (two decimals at most) and
// a negative or non-numeric one is refused before anything is sent.
func TestNewCmdSet(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		want    int64
		wantErr string
	}{
		{name: "price", args: []string{"jupyter", "0.50"}, want: 50},
		{name: "free", args: []string{"jupyter", "0"}, want: 0},
		{name: "three decimals", args: []string{"jupyter", "0.125"}, wantErr: "at most two decimals"},
		{name: "negative", args: []string{"jupyter", "--", "-1"}, wantErr: "negative"},
		{name: "not a number", args: []string{"jupyter", "cheap"}, wantErr: "not an amount"},
		{name: "no price", args: []string{"jupyter"}, wantErr: "price per hour"},
	} {
		ios, _, _, _ := cmdutil.Test()
		var got *SetOptions
		err := cmdtest.Execute(NewCmdSet(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *SetOptions) error { got = o; return nil }), tt.args...)
		if tt.wantErr != "" {
			var fe *cmdutil.FlagError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v; want a usage error saying %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.PriceMinor != tt.want || got.App != "jupyter" || got.Currency != "usd" {
			t.Errorf("%s: %+v, %v; want jupyter %d usd", tt.name, got, err, tt.want)
		}
	}
}

// TestWriteList: the table on a terminal (money) and piped rows (minor
// units, RFC 3339).
func TestWriteList(t *testing.T) {
	ps := []api.AppPrice{{AppID: "app-1", App: "jupyter", Lifecycle: "promoted", Currency: "usd", PricePerHourMinor: 50},
		{AppID: "app-2", App: "tiny", Lifecycle: "published", Currency: "usd"}}
	for _, tty := range []bool{true, false} {
		ios, _, out, _ := cmdutil.Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		if err := writeList(ios, ps); err != nil {
			t.Fatal(err)
		}
		want := []string{"app-1\tjupyter\tpromoted\t50\t\n", "app-2\ttiny\tpublished\t0\t\n"}
		if tty {
			want = []string{"APP", "jupyter", "$0.50", "$0.00"}
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("tty %v: output lacks %q:\n%s", tty, w, out.String())
			}
		}
	}
}
