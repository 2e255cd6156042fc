package job

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdLogs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var got *LogsOptions
	run := func(_ context.Context, o *LogsOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdLogs(f, run), "j-1", "-f", "--since", "10m", "--after", "42", "--json=seq,text"); err != nil ||
		got.ID != "j-1" || !got.Follow || got.After != 42 || got.Exporter == nil {
		t.Fatalf("logs: %v %+v", err, got)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, since string
		want        time.Time
	}{
		{"none", "", time.Time{}},
		{"duration", "90s", now.Add(-90 * time.Second)},
		{"time", "2026-03-01T11:00:00Z", now.Add(-time.Hour)},
	} {
		if s, err := parseSince(tt.since, now); err != nil || !s.Equal(tt.want) {
			t.Errorf("%s: got %v, %v; want %v", tt.name, s, err, tt.want)
		}
	}
	for _, args := range [][]string{{"j-1", "--since", "yesterday"}, {"j-1", "--since", "-5m"}, {"j-1", "--after", "-1"}} {
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdLogs(f, run), args...), args[1])
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdLogs(f, run)), "job ID")
}

func TestSafeLineKeepsTabsEscapesTheRest(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"epoch\t1\tloss 0.3", "epoch\t1\tloss 0.3"},
		{"\x1b]0;owned\x07title", `\x1b]0;owned\x07title`},
	} {
		if got := safeLine(tt.in); got != tt.want {
			t.Errorf("safeLine(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
