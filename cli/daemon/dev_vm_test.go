package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/devenv"
)

// TestDevVMFlags: --vm picks the minimal image by default and --vm-image
// the debian one; a bad image, --vm-image without --vm, and --vm with more
// than one slice host are usage errors that start nothing.
func TestDevVMFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantVM  string
		wantErr string
	}{
		{name: "off", wantVM: ""},
		{name: "minimal by default", args: []string{"--vm"}, wantVM: devenv.VMImageMinimal},
		{name: "debian", args: []string{"--vm", "--vm-image", "debian"}, wantVM: devenv.VMImageDebian},
		{name: "one host", args: []string{"--vm", "--hosts", "1"}, wantVM: devenv.VMImageMinimal},
		{name: "bad image", args: []string{"--vm", "--vm-image", "ubuntu"}, wantErr: "--vm-image must be minimal or debian"},
		{name: "image without vm", args: []string{"--vm-image", "debian"}, wantErr: "--vm-image needs --vm"},
		{name: "two slice hosts", args: []string{"--vm", "--hosts", "3"}, wantErr: "--hosts 1 or 2"},
		{name: "no host", args: []string{"--vm", "--hosts", "0"}, wantErr: "--hosts 1 or 2"},
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
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
					t.Fatalf("got %v (ran: %v); want a usage error saying %q", err, got != nil, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Config.VM != tt.wantVM {
				t.Fatalf("Config.VM = %q; want %q", got.Config.VM, tt.wantVM)
			}
		})
	}
}

// writeCounter records each Write it gets.
type writeCounter struct{ writes []string }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestDevBannerIsOneWrite: the banner, the --vm lines included, reaches
// stderr in one write, so a log line from another goroutine cannot land
// inside it and whoever waits for "gpuaas dev is running" (the e2e harness,
// a user's script) has the whole banner, the emulation warning with it.
func TestDevBannerIsOneWrite(t *testing.T) {
	w := &writeCounter{}
	opts := &DevOptions{IO: &cmdutil.IOStreams{ErrOut: w}, Config: devenv.Config{DataDir: "/tmp/d", Hosts: 2}}
	opts.Config.VM = devenv.VMImageMinimal
	env := &devenv.Env{NATSURL: "nats://127.0.0.1:4222", GatewayAddr: "127.0.0.1:2222", AppsURL: "https://*.localhost"}
	printBanner(opts, env, true)
	if len(w.writes) != 1 {
		t.Fatalf("the banner took %d writes; want 1", len(w.writes))
	}
	for _, want := range []string{"gpuaas dev is running", "EMULATED (TCG)", "not production timings", "Press Ctrl-C to stop."} {
		if !strings.Contains(w.writes[0], want) {
			t.Errorf("the banner lacks %q:\n%s", want, w.writes[0])
		}
	}
}
