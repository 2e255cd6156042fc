package audit

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdStream(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    StreamOptions
		wantErr string
	}{
		{name: "defaults", want: StreamOptions{Interval: time.Second}},
		{name: "resume", args: []string{"--after", "99", "--interval", "250ms", "--action", "alloc.*"},
			want: StreamOptions{After: 99, Interval: 250 * time.Millisecond, Filters: Filters{Action: "alloc.*"}}},
		{name: "too often", args: []string{"--interval", "1ms"}, wantErr: "invalid --interval 1ms"},
		{name: "negative after", args: []string{"--after", "-3"}, wantErr: "invalid --after -3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *StreamOptions
			err := cmdtest.Execute(NewCmdStream(f, func(_ context.Context, o *StreamOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.After != tt.want.After || got.Interval != tt.want.Interval || got.Filters != tt.want.Filters {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}
