package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestHostdVolumeGroup: --volume-group, from the flag or the settings
// file, names the node's LVM volume group; a sim host refuses it before
// hostd runs (docs/decisions/0063-volumes-on-lvm.md).
func TestHostdVolumeGroup(t *testing.T) {
	clearDaemonEnv(t)
	for _, tt := range []struct {
		name    string
		args    []string
		file    string
		want    string
		wantErr string
	}{
		{name: "default", want: ""},
		{name: "flag", args: []string{"--volume-group", "data"}, want: "data"},
		{name: "settings file", file: "volume-group: nvme\n", want: "nvme"},
		{name: "sim", args: []string{"--sim", "h200-slice", "--volume-group", "data"}, wantErr: "--volume-group is for real hosts"},
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
				if got != nil || !strings.Contains(fmtErr(err), tt.wantErr) {
					t.Errorf("got %v; want an error %q before hostd runs", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.VolumeGroup != tt.want {
				t.Errorf("got %q; want %q", got.VolumeGroup, tt.want)
			}
		})
	}
}

// TestNodeVolumesStopsAtAGroupLVMDoesNotKnow: a named volume group that
// LVM does not know stops hostd at start; without one the node keeps
// image files.
func TestNodeVolumesStopsAtAGroupLVMDoesNotKnow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("LVM's commands need root")
	}
	if _, err := exec.LookPath("vgs"); err != nil {
		t.Skip("lvm2 is not installed (scripts/deps test installs it)")
	}
	state := t.TempDir()
	if s, err := nodeVolumes(state, "gpuaasnosuchgroup", testutil.Logger(t)); err == nil || s != nil {
		t.Fatalf("nodeVolumes with a missing group = %v, %v; want an error and no store", s, err)
	} else if !strings.Contains(err.Error(), "--volume-group gpuaasnosuchgroup") {
		t.Errorf("error %q does not name the flag", err)
	}
	s, err := nodeVolumes(state, "", testutil.Logger(t))
	if err != nil || s == nil {
		t.Fatalf("nodeVolumes without a group = %v, %v; want the image store", s, err)
	}
	if _, err := os.Stat(filepath.Join(state, "volumes")); err != nil {
		t.Errorf("image store's directory: %v", err)
	}
}
