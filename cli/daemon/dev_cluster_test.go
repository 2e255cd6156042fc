package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestDevClusterFlag: --cluster asks for the cluster and takes free NATS
// ports (an explicit --nats-port with it is a usage error, 0 is fine);
// without it dev is as before, one server on --nats-port.
func TestDevClusterFlag(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantCluster bool
		wantPort    int
		wantErr     string
	}{
		{name: "default", wantPort: 4222},
		{name: "cluster", args: []string{"--cluster"}, wantCluster: true, wantPort: 0},
		{name: "cluster with port 0", args: []string{"--cluster", "--nats-port", "0"}, wantCluster: true, wantPort: 0},
		{name: "cluster with a port", args: []string{"--cluster", "--nats-port", "4333"}, wantErr: "--nats-port and --cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *DevOptions
			cmd := NewCmdDev(cmdtest.Factory(ios), nil, func(_ context.Context, o *DevOptions) error { got = o; return nil })
			cmd.SetArgs(append([]string{"--data", t.TempDir()}, tt.args...))
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Cluster != tt.wantCluster || got.NATSPort != tt.wantPort {
				t.Fatalf("got cluster %v, port %d; want %v, %d", got.Cluster, got.NATSPort, tt.wantCluster, tt.wantPort)
			}
		})
	}
}
