package node

import (
	"context"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdList(t *testing.T) {
	ios, out, _ := testStreams(false)
	var got *ListOptions
	if err := cmdtest.Execute(NewCmdList(cmdtest.Factory(ios), func(_ context.Context, o *ListOptions) error { got = o; return nil }), "--json=name,state"); err != nil {
		t.Fatal(err)
	}
	if err := got.Exporter.Write(context.Background(), ios, []any{testDetail().Node}); err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"gpu-01","state":"ready"}]` + "\n"; out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(cmdtest.Factory(ios), nil), "gpu-01"), "")
}

func TestNewCmdGet(t *testing.T) {
	ios, out, _ := testStreams(false)
	var got *GetOptions
	if err := cmdtest.Execute(NewCmdGet(cmdtest.Factory(ios), func(_ context.Context, o *GetOptions) error { got = o; return nil }),
		"gpu-01", "--jq", `.slots[] | select(.state == "free") | .id`); err != nil {
		t.Fatal(err)
	}
	if got.Node != "gpu-01" {
		t.Errorf("got node %q; want gpu-01", got.Node)
	}
	if err := got.Exporter.Write(context.Background(), ios, testDetail()); err != nil {
		t.Fatal(err)
	}
	if out.String() != "s-0\n" {
		t.Errorf("got %q; want s-0", out.String())
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdGet(cmdtest.Factory(ios), nil)), "")
}

func TestNewCmdSlotsApprove(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantNode  string
		wantSlots []string
	}{
		{"all pending", []string{"gpu-01"}, "gpu-01", []string{}},
		{"some", []string{"gpu-01", "s-0", "s-1"}, "gpu-01", []string{"s-0", "s-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams(false)
			var got *SlotsApproveOptions
			if err := cmdtest.Execute(NewCmdSlotsApprove(cmdtest.Factory(ios), func(_ context.Context, o *SlotsApproveOptions) error { got = o; return nil }), tt.args...); err != nil {
				t.Fatal(err)
			}
			if got.Node != tt.wantNode || !slices.Equal(got.Slots, tt.wantSlots) {
				t.Errorf("got %q %q; want %q %q", got.Node, got.Slots, tt.wantNode, tt.wantSlots)
			}
		})
	}
	ios, _, _ := testStreams(false)
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdSlotsApprove(cmdtest.Factory(ios), nil)), "")
}

func TestNewCmdDrain(t *testing.T) {
	ios, out, _ := testStreams(false)
	var got *DrainOptions
	if err := cmdtest.Execute(NewCmdDrain(cmdtest.Factory(ios), func(_ context.Context, o *DrainOptions) error { got = o; return nil }),
		"gpu-01", "--template", "{{.name}} {{.state}}"); err != nil {
		t.Fatal(err)
	}
	if got.Node != "gpu-01" {
		t.Errorf("got node %q; want gpu-01", got.Node)
	}
	n := testDetail().Node
	n.State = "draining"
	if err := got.Exporter.Write(context.Background(), ios, &n); err != nil {
		t.Fatal(err)
	}
	if out.String() != "gpu-01 draining" {
		t.Errorf("got %q; want %q", out.String(), "gpu-01 draining")
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdDrain(cmdtest.Factory(ios), nil), "a", "b"), "")
}

func TestNewCmdQuarantine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantSlot *int
		wantGPU  string
		wantErr  bool
	}{
		{name: "by slot", args: []string{"gpu-01", "--slot", "0", "--reason", "fan"}, wantSlot: new(int)},
		{name: "by gpu", args: []string{"gpu-01", "--gpu", "0000:3b:00.0", "--reason", "ecc"}, wantGPU: "0000:3b:00.0"},
		{name: "both", args: []string{"gpu-01", "--slot", "1", "--gpu", "0000:3b:00.0", "--reason", "x"}, wantErr: true},
		{name: "neither", args: []string{"gpu-01", "--reason", "x"}, wantErr: true},
		{name: "no reason", args: []string{"gpu-01", "--slot", "1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams(false)
			var got *QuarantineOptions
			err := cmdtest.Execute(NewCmdQuarantine(cmdtest.Factory(ios), func(_ context.Context, o *QuarantineOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr {
				cmdtest.WantUsageError(t, err, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got.Slot == nil) != (tt.wantSlot == nil) || (got.Slot != nil && *got.Slot != *tt.wantSlot) || got.GPU != tt.wantGPU {
				t.Errorf("got slot %v gpu %q; want %v %q", got.Slot, got.GPU, tt.wantSlot, tt.wantGPU)
			}
		})
	}
}

func TestNewCmdClear(t *testing.T) {
	ios, _, _ := testStreams(false)
	var got *ClearOptions
	if err := cmdtest.Execute(NewCmdClear(cmdtest.Factory(ios), func(_ context.Context, o *ClearOptions) error { got = o; return nil }), "gpu-01"); err != nil {
		t.Fatal(err)
	}
	if got.Node != "gpu-01" || got.Slot != nil || got.GPU != "" {
		t.Errorf("got %+v; want node gpu-01 and no slot", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdClear(cmdtest.Factory(ios), nil), "gpu-01", "--slot", "1", "--gpu", "x"), "")
}
