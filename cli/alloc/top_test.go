package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdTop(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantInterval time.Duration
		wantCount    int
		wantJSON     bool
		wantErr      string
	}{
		{name: "defaults", args: []string{"a-1"}, wantInterval: DefaultTopInterval},
		{name: "json count", args: []string{"a-1", "--json", "--count", "2"}, wantInterval: DefaultTopInterval, wantCount: 2, wantJSON: true},
		{name: "interval", args: []string{"a-1", "--interval", "5s"}, wantInterval: 5 * time.Second},
		{name: "interval too short", args: []string{"a-1", "--interval", "100ms"}, wantErr: "--interval must be at least 1s"},
		{name: "negative count", args: []string{"a-1", "--count", "-1"}, wantErr: "--count must not be negative"},
		{name: "no id", args: nil, wantErr: "allocation ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *TopOptions
			cmd := NewCmdTop(cmdtest.Factory(ios), func(_ context.Context, o *TopOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != "a-1" || got.Interval != tt.wantInterval || got.Count != tt.wantCount || (got.Exporter != nil) != tt.wantJSON {
				t.Errorf("got id %q interval %s count %d json %v; want a-1 %s %d %v", got.ID, got.Interval, got.Count,
					got.Exporter != nil, tt.wantInterval, tt.wantCount, tt.wantJSON)
			}
		})
	}
}

func TestTopFormat(t *testing.T) {
	u := uint64(40 << 30)
	total := uint64(80 << 30)
	p := 37.4
	if got := memory(&u, &total); got != "40.0/80.0 GiB" {
		t.Errorf("memory: got %q; want 40.0/80.0 GiB", got)
	}
	if got := memory(nil, nil); got != "-" {
		t.Errorf("memory of N/A: got %q; want -", got)
	}
	if got := pct(&p); got != "37%" {
		t.Errorf("pct: got %q; want 37%%", got)
	}
}
