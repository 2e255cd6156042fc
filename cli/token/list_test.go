package token

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdList(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantAll bool
		wantErr string
	}{
		{name: "live", args: nil},
		{name: "all", args: []string{"--all"}, wantAll: true},
		{name: "an argument", args: []string{"ci"}, wantErr: "unexpected argument"},
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
			if got.All != tt.wantAll {
				t.Errorf("all: got %v; want %v", got.All, tt.wantAll)
			}
		})
	}
}
