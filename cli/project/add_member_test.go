package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdAddMember(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    AddMemberOptions
		wantErr string
	}{
		{name: "default role", args: []string{"ml", "--email", "grace@example.com"},
			want: AddMemberOptions{Project: "ml", Email: "grace@example.com", Role: "member"}},
		{name: "viewer", args: []string{"ml", "--email", "grace@example.com", "--role", "viewer"},
			want: AddMemberOptions{Project: "ml", Email: "grace@example.com", Role: "viewer"}},
		{name: "owner", args: []string{"ml", "--email", "grace@example.com", "--role", "owner"},
			want: AddMemberOptions{Project: "ml", Email: "grace@example.com", Role: "owner"}},
		{name: "bad role", args: []string{"ml", "--email", "g@x", "--role", "admin"}, wantErr: `invalid --role "admin"`},
		{name: "no email", args: []string{"ml"}, wantErr: "--email is required"},
		{name: "no project", args: []string{"--email", "g@x"}, wantErr: "requires a project name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *AddMemberOptions
			err := cmdtest.Execute(NewCmdAddMember(f, func(_ context.Context, o *AddMemberOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Project != tt.want.Project || got.Email != tt.want.Email || got.Role != tt.want.Role {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}
