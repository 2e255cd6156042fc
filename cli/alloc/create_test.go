package alloc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdCreate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    CreateOptions
		wantErr string
	}{
		{name: "sku only", args: []string{"--sku", "h100-node"}, want: CreateOptions{SKU: "h100-node"}},
		{name: "everything", args: []string{"--sku", "h100-slice", "--gpus", "2", "--queue", "--idempotency-key", "k1"},
			want: CreateOptions{SKU: "h100-slice", GPUs: 2, Queue: true, IdempotencyKey: "k1"}},
		{name: "no sku", args: []string{"--gpus", "1"}, wantErr: "--sku is required"},
		{name: "zero gpus", args: []string{"--sku", "x", "--gpus", "0"}, wantErr: "--gpus must be at least 1"},
		{name: "negative gpus", args: []string{"--sku", "x", "--gpus", "-2"}, wantErr: "--gpus must be at least 1"},
		{name: "argument", args: []string{"--sku", "x", "extra"}, wantErr: "unexpected argument"},
		{name: "dry run", args: []string{"--sku", "x", "--gpus", "2", "--dry-run"}, want: CreateOptions{SKU: "x", GPUs: 2, DryRun: true}},
		{name: "dry run json", args: []string{"--sku", "x", "--dry-run", "--json", "fits,runway_seconds"}, want: CreateOptions{SKU: "x", DryRun: true}},
		{name: "dry run with wait", args: []string{"--sku", "x", "--dry-run", "--wait"}, wantErr: "--dry-run creates nothing to --wait for"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *CreateOptions
			cmd := NewCmdCreate(cmdtest.Factory(ios), func(_ context.Context, o *CreateOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SKU != tt.want.SKU || got.GPUs != tt.want.GPUs || got.Queue != tt.want.Queue || got.IdempotencyKey != tt.want.IdempotencyKey || got.DryRun != tt.want.DryRun {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
			if (got.Exporter != nil) != slices.Contains(tt.args, "--json") {
				t.Errorf("got exporter %v with args %v", got.Exporter, tt.args)
			}
		})
	}
}

func TestGPUsFor(t *testing.T) {
	tests := []struct {
		name    string
		sku     api.SKU
		want    int
		wantErr string
	}{
		{"baremetal in one size", api.SKU{ID: "h100-node", Shape: api.ShapeBaremetal, GPUCounts: []int{8}}, 8, ""},
		{"baremetal in two sizes", api.SKU{ID: "mix", Shape: api.ShapeBaremetal, GPUCounts: []int{4, 8}}, 0, "--gpus is required for baremetal SKU mix (one of 4, 8)"},
		{"slice", api.SKU{ID: "h100-slice", Shape: api.ShapeGPUSlice, GPUCounts: []int{1, 2, 4, 8}}, 0, "--gpus is required for gpu_slice SKU h100-slice (one of 1, 2, 4, 8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := gpusFor(tt.sku)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || err.Error() != tt.wantErr {
					t.Fatalf("got %v; want usage error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestCreateJSONOutput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fields", []string{"--json=id,state,gpus"}, `{"gpus":2,"id":"a-1","state":"active"}` + "\n"},
		{"jq", []string{"--jq", `.slots | map(.numa_node) | unique | .[]`}, "1\n"},
		{"template", []string{"--template", `{{.id}} on {{.node_id}}`}, "a-1 on node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(false)
			var opts *CreateOptions
			cmd := NewCmdCreate(cmdtest.Factory(ios), func(_ context.Context, o *CreateOptions) error { opts = o; return nil })
			if err := cmdtest.Execute(cmd, append([]string{"--sku", "h100-slice", "--gpus", "2"}, tt.args...)...); err != nil {
				t.Fatal(err)
			}
			a := testAlloc()
			if err := opts.Exporter.Write(context.Background(), ios, &a); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestPrintQuote(t *testing.T) {
	balance, runway := int64(1000), int64(5142)
	fits := api.AllocQuote{ProjectID: "p-1", SKU: "h200-slice", Shape: api.ShapeGPUSlice, GPUs: 2,
		PricePerHourMinor: 700, Currency: "usd", Fits: true, NodeID: "n-1"}
	withBalance := fits
	withBalance.BalanceMinor, withBalance.RunwaySeconds, withBalance.BurnPerHourMinor = &balance, &runway, 700
	// The runway is the project's: at its total burn, what already runs
	// and this one ($3.50/h + $7.00/h), not at this allocation's price.
	running, shortRunway := int64(100), int64(342)
	alsoRunning := withBalance
	alsoRunning.BalanceMinor, alsoRunning.RunwaySeconds, alsoRunning.BurnPerHourMinor = &running, &shortRunway, 1050
	alsoRunning.InsufficientFunds, alsoRunning.MinRunwaySeconds, alsoRunning.NeededMinor = true, 600, 175
	noTopups := alsoRunning
	noTopups.TopupsOff = true
	queued := api.AllocQuote{SKU: "h100-baremetal", Shape: api.ShapeBaremetal, GPUs: 8, PricePerHourMinor: 1760,
		Currency: "usd", Queued: true, QueuePosition: 3}
	full := queued
	full.Queued, full.QueuePosition = false, 0
	tests := []struct {
		name string
		tty  bool
		q    api.AllocQuote
		want string
	}{
		{"fits", true, fits, "  sku    h200-slice (gpu_slice, 2 GPUs)\n  price  $7.00 per hour\n  fits   yes, now (on n-1)\n"},
		{"fits with balance", true, withBalance, "  sku      h200-slice (gpu_slice, 2 GPUs)\n  price    $7.00 per hour\n" +
			"  fits     yes, now (on n-1)\n  balance  $10.00\n  runway   1h 25m at $7.00/h (this one; nothing else running)\n"},
		{"runway at the project's burn, too short", true, alsoRunning, "  sku      h200-slice (gpu_slice, 2 GPUs)\n  price    $7.00 per hour\n" +
			"  fits     yes, now (on n-1)\n  balance  $1.00\n  runway   5m at $10.50/h ($3.50/h already running + this one)\n" +
			"  funds    too low to create: $1.75 is needed for 10 minutes at $10.50/h; top up with `gpuaas billing topup`\n"},
		// The regression test of "the insufficient-funds hint points to
		// top-ups that dev does not have", for --dry-run.
		{"too short, no top-ups here", true, noTopups, "  sku      h200-slice (gpu_slice, 2 GPUs)\n  price    $7.00 per hour\n" +
			"  fits     yes, now (on n-1)\n  balance  $1.00\n  runway   5m at $10.50/h ($3.50/h already running + this one)\n" +
			"  funds    too low to create: $1.75 is needed for 10 minutes at $10.50/h; top-ups are off here: an administrator can add credit (`gpuaas admin credit`)\n"},
		{"queued", true, queued, "  sku    h100-baremetal (baremetal, 8 GPUs)\n  price  $17.60 per hour\n" +
			"  fits   not now: it would be #3 in line for h100-baremetal\n"},
		{"no capacity", true, full, "  sku    h100-baremetal (baremetal, 8 GPUs)\n  price  $17.60 per hour\n" +
			"  fits   no capacity now (add --queue to wait in line)\n"},
		{"piped", false, withBalance, "h200-slice\t2\t700\tusd\ttrue\t0\t1000\t5142\t700\ttrue\n"},
		{"piped, too little", false, alsoRunning, "h200-slice\t2\t700\tusd\ttrue\t0\t100\t342\t1050\tfalse\n"},
		{"piped, no balance known", false, queued, "h100-baremetal\t8\t1760\tusd\tfalse\t3\t\t\t0\ttrue\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errOut := cmdtest.Streams(tt.tty)
			if err := printQuote(ios, &tt.q); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			wantErr := ""
			if tt.tty {
				wantErr = "Dry run: nothing was created.\n"
			}
			if got := errOut.String(); got != wantErr {
				t.Errorf("got stderr %q; want %q", got, wantErr)
			}
		})
	}
}

func TestFormatRunway(t *testing.T) {
	tests := []struct {
		seconds int64
		want    string
	}{
		{-5, "none left"}, {0, "none left"}, {59, "under a minute"}, {60, "1m"}, {3599, "59m"},
		{3600, "1h 0m"}, {5142, "1h 25m"}, {86400 + 7200, "1d 2h"}, {400 * 86400, "400d 0h"},
	}
	for _, tt := range tests {
		if got := api.FormatRunway(tt.seconds); got != tt.want {
			t.Errorf("api.FormatRunway(%d) = %q; want %q", tt.seconds, got, tt.want)
		}
	}
}

// TestCreateDryRun runs `alloc create --dry-run` against a real controld:
// it reports the quote and leaves no allocation behind.
func TestCreateDryRun(t *testing.T) {
	_, c := waitEnv(t)
	ios, _, out, _ := cmdtest.Streams(false)
	opts := &CreateOptions{IO: ios, Now: func() time.Time { return now }, SKU: "h100-baremetal", DryRun: true,
		Client: func() (*api.Client, error) { return c, nil }}
	if err := createRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	// The GPU count came from the catalog (one size), the price from the SKU;
	// the test project's $100 last 10000*3600/1760 s at $17.60/h, nothing
	// else running, and are enough to create it.
	if got, want := out.String(), "h100-baremetal\t8\t1760\tusd\ttrue\t0\t10000\t20454\t1760\ttrue\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	list, err := c.AllocList(context.Background(), api.AllocListRequest{All: true})
	if err != nil || len(list.Allocations) != 0 {
		t.Fatalf("after a dry run: %v, %d allocations; want none", err, len(list.Allocations))
	}
	opts.SKU, opts.GPUs = "h200-slice", 3
	if err := createRun(context.Background(), opts); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("dry run of 3 GPUs got %v; want invalid_argument as create would", err)
	}
}

// TestCreateHelpNamesRealSKUs is the regression test of "`alloc create
// --help` shows a SKU that does not exist": every --sku of its examples
// is in the catalog gpuaas dev and fresh installs are seeded with.
func TestCreateHelpNamesRealSKUs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	cmd := NewCmdCreate(cmdtest.Factory(ios), nil)
	fields := strings.Fields(cmd.Example + " " + cmd.Long)
	n := 0
	for i, f := range fields {
		if f != "--sku" || i+1 == len(fields) || strings.HasPrefix(fields[i+1], "SKU") {
			continue
		}
		n++
		sku := strings.Trim(fields[i+1], "`")
		if !slices.ContainsFunc(catalog.Defaults, func(s api.SKU) bool { return s.ID == sku }) {
			t.Errorf("alloc create --help names SKU %q; the catalog has no such SKU", sku)
		}
	}
	if n == 0 {
		t.Fatal("no --sku in alloc create's examples")
	}
}
