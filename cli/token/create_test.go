package token

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdCreate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    CreateOptions
		wantErr string
	}{
		{name: "defaults", args: []string{"ci"}, want: CreateOptions{Name: "ci", Role: "viewer", TTL: "30d"}},
		{name: "member for 12h", args: []string{"ci", "--role", "member", "--ttl", "12h"},
			want: CreateOptions{Name: "ci", Role: "member", TTL: "12h"}},
		{name: "owner", args: []string{"ci", "--role", "owner"}, wantErr: `invalid --role "owner"`},
		{name: "ttl 0", args: []string{"ci", "--ttl", "0d"}, wantErr: "invalid --ttl"},
		{name: "ttl over the maximum", args: []string{"ci", "--ttl", "400d"}, wantErr: "longer than the maximum"},
		{name: "ttl not a duration", args: []string{"ci", "--ttl", "soon"}, wantErr: "not a duration"},
		{name: "no name", args: []string{}, wantErr: "requires a token name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *CreateOptions
			err := cmdtest.Execute(NewCmdCreate(f, func(_ context.Context, o *CreateOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.Role != tt.want.Role || got.TTL != tt.want.TTL {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}
