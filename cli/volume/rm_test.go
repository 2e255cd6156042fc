package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdRemove(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *RemoveOptions
	cmd := NewCmdRemove(cmdtest.Factory(ios), func(_ context.Context, o *RemoveOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "data", "-y", "--wait"); err != nil {
		t.Fatal(err)
	}
	if got.Volume != "data" || !got.Yes || !got.Wait {
		t.Errorf("got %+v", *got)
	}
	err := cmdtest.Execute(NewCmdRemove(cmdtest.Factory(ios), func(context.Context, *RemoveOptions) error { return nil }), "--yes")
	cmdtest.WantUsageError(t, err, "volume name")
}

// TestRemoveConfirmation: a terminal is asked, and anything but yes
// sends nothing; --yes and a pipe are not asked.
func TestRemoveConfirmation(t *testing.T) {
	tests := []struct {
		name       string
		tty, yes   bool
		input      string
		wantErr    error
		wantPrompt bool
	}{
		{"tty declined", true, false, "n\n", cmdutil.ErrCancelled, true},
		{"tty default is no", true, false, "\n", cmdutil.ErrCancelled, true},
		{"tty confirmed", true, false, "yes\n", cmdtest.ErrReachedServer, true},
		{"tty --yes", true, true, "", cmdtest.ErrReachedServer, false},
		{"piped never prompts", false, false, "", cmdtest.ErrReachedServer, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := cmdtest.Streams(tt.tty)
			in.WriteString(tt.input)
			opts := &RemoveOptions{IO: ios, Volume: "data", Yes: tt.yes,
				Client: func() (*api.Client, error) { return nil, cmdtest.ErrReachedServer }}
			err := removeRun(context.Background(), opts)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v; want %v", err, tt.wantErr)
			}
			prompted := errOut.String() == "Delete volume data and all its data? [y/N] "
			if prompted != tt.wantPrompt {
				t.Errorf("got stderr %q; want prompt %v", errOut.String(), tt.wantPrompt)
			}
		})
	}
}
