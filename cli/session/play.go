package session

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DefaultIdleLimit caps pauses during playback.
const DefaultIdleLimit = 2 * time.Second

// PlayOptions are the inputs of `gpuaas session play`.
type PlayOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)
	// Sleep is the player's clock; nil is the real one.
	Sleep func(ctx context.Context, d time.Duration) error

	ID        string
	Raw       bool
	Speed     float64
	IdleLimit time.Duration
	Resize    bool
}

// NewCmdPlay builds `gpuaas session play`; runF replaces playRun in tests.
func NewCmdPlay(f *cmdutil.Factory, runF func(context.Context, *PlayOptions) error) *cobra.Command {
	opts := &PlayOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "play <session-id>",
		Short: "Play back a recorded terminal session",
		Long: `Play back the recording of a terminal session in real time, or write the
recording itself (asciicast v2, playable with asciinema) with --raw.

Pauses longer than --idle-limit are shortened; --speed plays faster (2)
or slower (0.5). Press Ctrl-C to stop.`,
		Example: `  gpuaas session play ts-4f9k2m7x1c0a
  gpuaas session play ts-4f9k2m7x1c0a --speed 4
  gpuaas session play ts-4f9k2m7x1c0a --raw > session.cast && asciinema play session.cast`,
		Args: cmdutil.ExactArgs(1, "a session ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			switch {
			case opts.Speed <= 0:
				return cmdutil.FlagErrorf("--speed must be above 0")
			case opts.IdleLimit < 0:
				return cmdutil.FlagErrorf("--idle-limit cannot be negative")
			case opts.Raw && (c.Flags().Changed("speed") || c.Flags().Changed("idle-limit") || opts.Resize):
				return cmdutil.FlagErrorf("--raw writes the recording as stored: --speed, --idle-limit and --resize apply to playback")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return playRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Raw, "raw", false, "Write the asciicast v2 recording to standard output instead of playing it")
	cmd.Flags().Float64Var(&opts.Speed, "speed", 1, "Playback speed factor")
	cmd.Flags().DurationVar(&opts.IdleLimit, "idle-limit", DefaultIdleLimit, "Longest pause to play; 0 keeps pauses whole (a recording's own idle_time_limit still applies)")
	cmd.Flags().BoolVar(&opts.Resize, "resize", false, "Ask the terminal to take the recorded size (xterm sequence)")
	return cmd
}

func playRun(ctx context.Context, opts *PlayOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	s, err := client.SessionGet(ctx, opts.ID)
	if err != nil {
		return err
	}
	if s.Recording == "" {
		return api.Errorf(api.CodeNotFound, "session %s has no recording: only sessions with a terminal are recorded", opts.ID)
	}
	if opts.Raw {
		_, err := client.SessionRecording(ctx, opts.ID, opts.IO.Out)
		return err
	}
	// Fetch it all before playing: playback takes as long as the session
	// did.
	tmp, err := os.CreateTemp("", "gpuaas-session-*.cast")
	if err != nil {
		return fmt.Errorf("fetch recording: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := client.SessionRecording(ctx, opts.ID, tmp); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("fetch recording: %w", err)
	}
	p := &Player{Out: opts.IO.Out, Speed: opts.Speed, MaxIdle: opts.IdleLimit, Sleep: opts.Sleep}
	if opts.Resize && opts.IO.IsStdoutTTY() {
		p.Resize = func(cols, rows int) error {
			_, err := io.WriteString(opts.IO.Out, ResizeSequence(cols, rows))
			return err
		}
	}
	return p.Play(ctx, tmp)
}
