package audit

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdExport(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ExportOptions
		wantErr string
	}{
		{name: "ndjson", args: []string{"--format", "ndjson", "--since", "1h"}, want: ExportOptions{Format: "ndjson", Filters: Filters{Since: "1h"}}},
		{name: "after", args: []string{"--after", "7", "--all"}, want: ExportOptions{Format: "ndjson", After: 7, Filters: Filters{All: true}}},
		{name: "csv", args: []string{"--format", "csv"}, wantErr: `invalid --format "csv"`},
		{name: "negative after", args: []string{"--after", "-1"}, wantErr: "invalid --after -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *ExportOptions
			err := cmdtest.Execute(NewCmdExport(f, func(_ context.Context, o *ExportOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tt.want.Format || got.After != tt.want.After || got.Filters != tt.want.Filters {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}
