package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
)

// TestHostdTenantMemoryReserve: --tenant-memory-reserve, from the flag
// or the settings file, takes a size in bytes or binary units; anything
// else is a usage error before hostd runs.
func TestHostdTenantMemoryReserve(t *testing.T) {
	clearDaemonEnv(t)
	for _, tt := range []struct {
		name    string
		args    []string
		file    string
		want    int64
		wantErr string
	}{
		{name: "default", want: 0},
		{name: "GiB", args: []string{"--tenant-memory-reserve", "2GiB"}, want: 2 << 30},
		{name: "short unit", args: []string{"--tenant-memory-reserve", "512M"}, want: 512 << 20},
		{name: "bytes", args: []string{"--tenant-memory-reserve", "1048576"}, want: 1 << 20},
		{name: "settings file", file: "tenant-memory-reserve: 3GiB\n", want: 3 << 30},
		{name: "flag over file", args: []string{"--tenant-memory-reserve", "1GiB"}, file: "tenant-memory-reserve: 3GiB\n", want: 1 << 30},
		{name: "decimal unit", args: []string{"--tenant-memory-reserve", "2GB"}, wantErr: `"2GB" is not a size`},
		{name: "percent", args: []string{"--tenant-memory-reserve", "5%"}, wantErr: "is not a size"},
		{name: "negative", args: []string{"--tenant-memory-reserve", "-1GiB"}, wantErr: "is not a size"},
		{name: "too large", args: []string{"--tenant-memory-reserve", "9000000TiB"}, wantErr: "too large"},
		{name: "bad file value", file: "tenant-memory-reserve: lots\n", wantErr: `"lots" is not a size`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *HostdOptions
			cmd := NewCmdHostd(cmdtest.Factory(ios), func(_ context.Context, o *HostdOptions) error { got = o; return nil })
			args := tt.args
			if tt.file != "" {
				args = append(args, "--config", settingsFile(t, tt.file))
			}
			err := runDaemon(cmd, ios, args...)
			if tt.wantErr != "" {
				// (cobra's flag errors become usage errors in cli.Main.)
				if got != nil || !strings.Contains(fmtErr(err), tt.wantErr) {
					t.Errorf("got %v; want an error %q before hostd runs", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if int64(got.TenantMemoryReserve) != tt.want {
				t.Errorf("got %d; want %d", got.TenantMemoryReserve, tt.want)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestByteSizeString: a size prints in the largest unit that divides it,
// and reads back the same.
func TestByteSizeString(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0"}, {1, "1B"}, {1536, "1536B"}, {3 << 10, "3KiB"}, {2 << 30, "2GiB"}, {3 << 40, "3TiB"}, {1<<30 + 1, "1073741825B"}} {
		b := byteSize(tt.n)
		if got := b.String(); got != tt.want {
			t.Errorf("%d: got %q; want %q", tt.n, got, tt.want)
		}
		var back byteSize
		if err := back.Set(b.String()); err != nil || back != b {
			t.Errorf("%q read back as %d, %v; want %d", b.String(), back, err, tt.n)
		}
	}
}

// TestTenancyMetrics: a node without per-allocation cgroups exports 0,
// one with them 1 and their memory limit.
func TestTenancyMetrics(t *testing.T) {
	off := gauges(t, tenancyMetrics(&host.Tenancy{}))
	if got := off["gpuaas_hostd_tenant_cgroups"]; got != 0 {
		t.Errorf("without cgroups: tenant_cgroups %v; want 0", got)
	}
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	cg, err := host.OpenCgroups(host.CgroupConfig{Name: "gpuaas-test-metrics-" + strconv.Itoa(os.Getpid()), MemoryMax: 64 << 20})
	if errors.Is(err, host.ErrCgroupsUnavailable) {
		t.Skipf("cgroups: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range cg.Dirs("x") {
			_ = os.Remove(filepath.Dir(d))
		}
	})
	on := gauges(t, tenancyMetrics(&host.Tenancy{Cgroups: cg}))
	if got, limit := on["gpuaas_hostd_tenant_cgroups"], on["gpuaas_hostd_tenant_memory_limit_bytes"]; got != 1 || limit != 64<<20 {
		t.Errorf("with cgroups: tenant_cgroups %v, memory limit %v; want 1, %d", got, limit, 64<<20)
	}
}

// gauges gathers cs: each gauge's value by name.
func gauges(t *testing.T, cs []prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestHardStopsCounted: each guest a release destroyed adds one to
// gpuaas_hostd_vm_hard_stops_total, through the env's HardStop.
func TestHardStopsCounted(t *testing.T) {
	env := &tasks.Env{}
	c := countHardStops(env)
	env.HardStop()
	env.HardStop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "gpuaas_hostd_vm_hard_stops_total" || mfs[0].GetMetric()[0].GetCounter().GetValue() != 2 {
		t.Fatalf("got %v; want gpuaas_hostd_vm_hard_stops_total 2", mfs)
	}
}
