package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdMembers(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"named", []string{"ml"}, "ml", false},
		{"current", nil, "", false},
		{"two", []string{"a", "b"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *MembersOptions
			err := cmdtest.Execute(NewCmdMembers(f, func(_ context.Context, o *MembersOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr {
				cmdtest.WantUsageError(t, err, "too many arguments")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Project != tt.want {
				t.Errorf("got %q; want %q", got.Project, tt.want)
			}
		})
	}
}
