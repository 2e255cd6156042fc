package token

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdRevoke(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "by name", args: []string{"ci"}, want: "ci"},
		{name: "by id", args: []string{"tk-0123456789ab"}, want: "tk-0123456789ab"},
		{name: "none", args: nil, wantErr: "requires a token name or id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *RevokeOptions
			err := cmdtest.Execute(NewCmdRevoke(f, func(_ context.Context, o *RevokeOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Token != tt.want {
				t.Errorf("token: got %q; want %q", got.Token, tt.want)
			}
		})
	}
}
