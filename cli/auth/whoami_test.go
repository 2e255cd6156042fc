package auth

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func testWhoami() *api.WhoamiResponse {
	return &api.WhoamiResponse{
		User:      api.User{ID: "u-1", Email: "admin@localhost", Role: api.RoleAdmin, Provider: "local"},
		SessionID: "sess-1",
		ExpiresAt: now.Add(11 * time.Hour),
		Projects:  []api.Project{{ID: "p-1", Name: "dev", Role: api.ProjectOwner}, {ID: "p-2", Name: "ml", Role: api.ProjectViewer}},
	}
}

func TestPrintWhoami(t *testing.T) {
	active := clientconfig.Active{Name: "dev", Context: clientconfig.Context{Server: "nats://127.0.0.1:4222", Project: "dev"}}
	tests := []struct {
		name string
		tty  bool
		want string
	}{
		{"tty", true, `email     admin@localhost
user_id   u-1
role      admin
context   dev
server    nats://127.0.0.1:4222
project   dev
projects  dev (owner), ml (viewer)
expires   in 11h
`},
		{"piped", false, "email\tadmin@localhost\nuser_id\tu-1\nrole\tadmin\ncontext\tdev\nserver\tnats://127.0.0.1:4222\n" +
			"project\tdev\nprojects\tdev, ml\nexpires\t2030-01-10T23:00:00Z\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(tt.tty)
			if err := printWhoami(ios, now, active, testWhoami()); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestWhoamiJSON(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fields", []string{"--json=user,session_id"}, `{"session_id":"sess-1","user":{"created_at":"0001-01-01T00:00:00Z","email":"admin@localhost","id":"u-1","provider":"local","role":"admin"}}` + "\n"},
		{"jq", []string{"--jq", ".user.email"}, "admin@localhost\n"},
		{"template", []string{"-t", `{{.user.email}} {{range .projects}}{{.name}}:{{.role}} {{end}}`}, "admin@localhost dev:owner ml:viewer "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var opts *WhoamiOptions
			cmd := NewCmdWhoami(f, func(_ context.Context, o *WhoamiOptions) error { opts = o; return nil })
			if err := cmdtest.Execute(cmd, tt.args...); err != nil {
				t.Fatal(err)
			}
			if err := opts.Exporter.Write(context.Background(), ios, testWhoami()); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
