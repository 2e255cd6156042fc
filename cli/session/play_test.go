package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
)

func TestNewCmdPlay(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    PlayOptions
		wantErr bool
	}{
		{name: "defaults", args: []string{"s-1"}, want: PlayOptions{ID: "s-1", Speed: 1, IdleLimit: DefaultIdleLimit}},
		{name: "playback flags", args: []string{"s-1", "--speed", "4", "--idle-limit", "0", "--resize"},
			want: PlayOptions{ID: "s-1", Speed: 4, Resize: true}},
		{name: "raw", args: []string{"s-1", "--raw"}, want: PlayOptions{ID: "s-1", Raw: true, Speed: 1, IdleLimit: DefaultIdleLimit}},
		{name: "raw with speed", args: []string{"s-1", "--raw", "--speed", "2"}, wantErr: true},
		{name: "zero speed", args: []string{"s-1", "--speed", "0"}, wantErr: true},
		{name: "negative idle limit", args: []string{"s-1", "--idle-limit", "-1s"}, wantErr: true},
		{name: "no id", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *PlayOptions
			err := cmdtest.Execute(NewCmdPlay(cmdtest.Factory(ios), func(_ context.Context, o *PlayOptions) error { got = o; return nil }), tt.args...)
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
			if got.ID != tt.want.ID || got.Raw != tt.want.Raw || got.Speed != tt.want.Speed ||
				got.IdleLimit != tt.want.IdleLimit || got.Resize != tt.want.Resize {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

// playFixture serves the sessions of testSessions and, for session s-2,
// its recording through session.recording in chunks of 7 bytes, so a
// playback takes many requests; s-3's recording is missing.
func playFixture(t *testing.T) *sshkeystest.Controld {
	t.Helper()
	ctrl := sshkeystest.Start(t, time.Now)
	serveSessions(t, ctrl, append(testSessions(),
		api.TerminalSession{ID: "s-3", AllocationID: "a-1", Kind: api.SessionShell, StartedAt: started, Recording: "missing.cast"}))
	ctrl.Handle(t, api.EndpointSessionRecording, func(m *nats.Msg) (any, error) {
		var req api.RecordingRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return nil, err
		}
		if req.ID != "s-2" {
			return nil, api.Errorf(api.CodeNotFound, "recording of %s is not in the store", req.ID)
		}
		end := min(int(req.Offset)+7, len(recording))
		return api.RecordingChunk{Data: []byte(recording[req.Offset:end]), Size: int64(len(recording)),
			EOF: end == len(recording)}, nil
	})
	return ctrl
}

func TestPlayChunks(t *testing.T) {
	ctrl := playFixture(t)
	tests := []struct {
		name string
		opts PlayOptions
		want string
	}{
		{name: "play writes the output events", opts: PlayOptions{Speed: 1, IdleLimit: DefaultIdleLimit}, want: recordingOutput},
		{name: "raw writes the recording unchanged", opts: PlayOptions{Raw: true}, want: recording},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdutil.Test()
			var slept time.Duration
			opts := tt.opts
			opts.IO, opts.ID = ios, "s-2"
			opts.Client = func() (*api.Client, error) { return ctrl.Client(sshkeystest.Token), nil }
			opts.Sleep = func(_ context.Context, d time.Duration) error { slept += d; return nil }
			if err := playRun(context.Background(), &opts); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got %q; want %q", out.String(), tt.want)
			}
			if !opts.Raw && slept < 2*time.Second {
				t.Errorf("got %v of pauses; want the recording's timing (about 3s)", slept)
			}
		})
	}
}

func TestPlayNotFound(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string
	}{
		{"unknown session", "s-9", "not found"},
		{"session without a terminal", "s-1", "has no recording"},
		{"recording missing from the store", "s-3", "not in the store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := playFixture(t)
			ios, _, out, _ := cmdutil.Test()
			opts := &PlayOptions{IO: ios, ID: tt.id, Raw: true,
				Client: func() (*api.Client, error) { return ctrl.Client(sshkeystest.Token), nil }}
			err := playRun(context.Background(), opts)
			if cmdutil.ExitCodeOf(err) != cmdutil.ExitNotFound || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v (exit %d); want not found, %q", err, cmdutil.ExitCodeOf(err), tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("got output %q; want none", out)
			}
		})
	}
}
