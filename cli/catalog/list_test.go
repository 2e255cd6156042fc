package catalog

import (
	"context"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

var testSKUs = []api.SKU{
	{ID: "h100-node", Shape: api.ShapeBaremetal, GPUModel: "H100 SXM", GPUCounts: []int{8}, PricePerGPUHourMinor: 250, Currency: "USD"},
	{ID: "h100-slice", Shape: api.ShapeGPUSlice, GPUModel: "H100 SXM", GPUCounts: []int{1, 2, 4, 8}, PricePerGPUHourMinor: 275, Currency: "usd"},
}

// availableSKUs are testSKUs as catalog.list reports them: the bare-metal
// node is busy, and no host serves slices.
func availableSKUs() []api.SKU {
	out := slices.Clone(testSKUs)
	out[0].Availability = &api.SKUAvailability{FreeGPUs: 0, Nodes: 1}
	out[1].Availability = &api.SKUAvailability{FreeGPUs: 0, Nodes: 0}
	return out
}

func TestPrintSKUs(t *testing.T) {
	tests := []struct {
		name       string
		tty        bool
		skus       []api.SKU
		want       string
		wantStderr string
	}{
		{"tty", true, testSKUs, "SKU         SHAPE      GPU       COUNTS   PRICE/GPU-HR  FREE GPUS  NODES\n" +
			"h100-node   baremetal  H100 SXM  8        $2.50\n" +
			"h100-slice  gpu_slice  H100 SXM  1,2,4,8  $2.75\n", ""},
		{"piped", false, testSKUs, "h100-node\tbaremetal\tH100 SXM\t8\t$2.50\t\t\nh100-slice\tgpu_slice\tH100 SXM\t1,2,4,8\t$2.75\t\t\n", ""},
		{"tty with availability", true, availableSKUs(), "SKU         SHAPE      GPU       COUNTS   PRICE/GPU-HR  FREE GPUS  NODES\n" +
			"h100-node   baremetal  H100 SXM  8        $2.50         0          1\n" +
			"h100-slice  gpu_slice  H100 SXM  1,2,4,8  $2.75         -          none\n",
			"\nNo host serves h100-slice now: a request can only wait in line (--queue). `gpuaas catalog list --available` lists what can be rented now.\n"},
		{"piped with availability", false, availableSKUs(),
			"h100-node\tbaremetal\tH100 SXM\t8\t$2.50\t0\t1\nh100-slice\tgpu_slice\tH100 SXM\t1,2,4,8\t$2.75\t0\t0\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errOut := cmdutil.Test()
			ios.SetStdoutTTY(tt.tty)
			ios.SetNoColor(true)
			if err := printSKUs(ios, tt.skus); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			if got := errOut.String(); got != tt.wantStderr {
				t.Errorf("got stderr %q; want %q", got, tt.wantStderr)
			}
		})
	}
}

func TestRentableNow(t *testing.T) {
	slice := testSKUs[1]
	tests := []struct {
		name string
		av   *api.SKUAvailability
		want bool
	}{
		{"unknown", nil, false},
		{"no host", &api.SKUAvailability{}, false},
		{"all busy", &api.SKUAvailability{Nodes: 2}, false},
		{"one free GPU, smallest count 1", &api.SKUAvailability{FreeGPUs: 1, Nodes: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := slice
			s.Availability = tt.av
			if got := rentableNow(s); got != tt.want {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
	node := testSKUs[0]
	node.Availability = &api.SKUAvailability{FreeGPUs: 4, Nodes: 1}
	if rentableNow(node) {
		t.Error("4 free GPUs for an 8-GPU node: got rentable; want not")
	}
}

func TestNewCmdList(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string // exporter output for testSKUs; "" means no exporter
		wantErr bool
	}{
		{name: "table", args: nil},
		{name: "json fields", args: []string{"--json=id,gpu_counts"}, want: `[{"gpu_counts":[8],"id":"h100-node"},{"gpu_counts":[1,2,4,8],"id":"h100-slice"}]` + "\n"},
		{name: "jq", args: []string{"--jq", `.[] | select(.shape == "gpu_slice") | .price_per_gpu_hour_minor`}, want: "275\n"},
		{name: "template", args: []string{"--template", `{{range .}}{{.id}}={{join "/" .gpu_counts}} {{end}}`}, want: "h100-node=8 h100-slice=1/2/4/8 "},
		{name: "argument", args: []string{"h100"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdutil.Test()
			f := &cmdutil.Factory{IOStreams: ios}
			var got *ListOptions
			cmd := NewCmdList(f, func(_ context.Context, o *ListOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tt.wantErr {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if got.Exporter != nil {
					t.Error("got an exporter; want none")
				}
				return
			}
			if err := got.Exporter.Write(context.Background(), ios, testSKUs); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got %q; want %q", out.String(), tt.want)
			}
		})
	}
}

// TestPrintSKUsColourKeepsAlignment: with colour on, the availability
// columns are coloured after alignment, so the table reads the same once
// the escapes are taken out.
func TestPrintSKUsColourKeepsAlignment(t *testing.T) {
	render := func(colour bool) string {
		ios, _, out, _ := cmdutil.Test()
		ios.SetStdoutTTY(true)
		ios.SetNoColor(!colour)
		skus := availableSKUs()
		skus[0].Availability.FreeGPUs = 8
		if err := printSKUs(ios, skus); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	coloured, plain := render(true), render(false)
	if !strings.Contains(coloured, "\x1b[") {
		t.Fatalf("no colour with colour on:\n%s", coloured)
	}
	if got := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(coloured, ""); got != plain {
		t.Errorf("without its escapes the coloured table reads\n%s\nwant\n%s", got, plain)
	}
}
