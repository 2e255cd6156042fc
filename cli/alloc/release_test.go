package alloc

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdRelease(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ReleaseOptions
		wantErr bool
	}{
		{name: "id", args: []string{"a-1"}, want: ReleaseOptions{ID: "a-1"}},
		{name: "all flags", args: []string{"a-1", "--force", "--reason", "node broke", "-y"},
			want: ReleaseOptions{ID: "a-1", Force: true, Reason: "node broke", Yes: true}},
		{name: "idempotency key", args: []string{"a-1", "--idempotency-key", "k1"}, want: ReleaseOptions{ID: "a-1", IdempotencyKey: "k1"}},
		{name: "no id", args: []string{"--yes"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *ReleaseOptions
			cmd := NewCmdRelease(cmdtest.Factory(ios), func(_ context.Context, o *ReleaseOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
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
			if got.ID != tt.want.ID || got.Force != tt.want.Force || got.Reason != tt.want.Reason || got.Yes != tt.want.Yes ||
				got.IdempotencyKey != tt.want.IdempotencyKey {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestReleaseConfirmation(t *testing.T) {
	tests := []struct {
		name       string
		tty, yes   bool
		input      string
		wantErr    error
		wantPrompt bool
	}{
		{"tty declined", true, false, "n\n", cmdutil.ErrCancelled, true},
		{"tty default is no", true, false, "\n", cmdutil.ErrCancelled, true},
		{"tty confirmed", true, false, "y\n", cmdtest.ErrReachedServer, true},
		{"tty --yes", true, true, "", cmdtest.ErrReachedServer, false},
		{"piped never prompts", false, false, "", cmdtest.ErrReachedServer, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := cmdtest.Streams(tt.tty)
			in.WriteString(tt.input)
			opts := &ReleaseOptions{IO: ios, ID: "a-1", Yes: tt.yes,
				Client: func() (*api.Client, error) { return nil, cmdtest.ErrReachedServer }}
			err := releaseRun(context.Background(), opts)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v; want %v", err, tt.wantErr)
			}
			prompted := errOut.String() == "Release allocation a-1? [y/N] "
			if prompted != tt.wantPrompt {
				t.Errorf("got stderr %q; want prompt %v", errOut.String(), tt.wantPrompt)
			}
		})
	}
}
