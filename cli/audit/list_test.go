package audit

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdList(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ListOptions
		wantErr string
	}{
		{name: "defaults", want: ListOptions{Limit: 50}},
		{name: "filters", args: []string{"--since", "1h", "--actor", "tk-1", "--action", "alloc.*", "--target", "a-1", "--all", "--limit", "5"},
			want: ListOptions{Filters: Filters{Since: "1h", Actor: "tk-1", Action: "alloc.*", Target: "a-1", All: true}, Limit: 5}},
		{name: "after", args: []string{"--after", "42"}, want: ListOptions{Limit: 50, After: 42}},
		{name: "limit 0", args: []string{"--limit", "0"}, wantErr: "invalid --limit 0"},
		{name: "limit over a page", args: []string{"--limit", "1001"}, wantErr: "invalid --limit 1001"},
		{name: "bad since", args: []string{"--since", "yesterday"}, wantErr: `invalid --since "yesterday"`},
		{name: "negative since", args: []string{"--since", "-1h"}, wantErr: "want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *ListOptions
			err := cmdtest.Execute(NewCmdList(f, func(_ context.Context, o *ListOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Filters != tt.want.Filters || got.Limit != tt.want.Limit || got.After != tt.want.After {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"1h", now.Add(-time.Hour)},
		{"7d", now.Add(-7 * 24 * time.Hour)},
		{"2026-11-28T10:00:00Z", time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		got, err := parseSince(tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseSince(%q): got %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
