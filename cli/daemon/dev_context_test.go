package daemon

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// TestDevRestartKeepsTheContextUserWithItsSession: restarting `gpuaas dev`
// used to set the dev context's user back to admin@localhost while
// keeping another person's token and user id, so `context list` named
// the admin and `whoami` the person. The user now stays with the session
// it belongs to; a context without a session gets the admin; a reset or a
// moved server starts the context over (no project pinned: the server
// keeps the default project).
func TestDevRestartKeepsTheContextUserWithItsSession(t *testing.T) {
	const url, gateway = "nats://127.0.0.1:4222", "127.0.0.1:2222"
	expires := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	grace := clientconfig.Context{Server: url, User: "grace@idp.example.test", UserID: "u_grace", Token: "grace-token",
		TokenExpiresAt: expires, Project: "ml", Gateway: gateway}
	tests := []struct {
		name   string
		before clientconfig.Context
		url    string
		reset  bool
		want   clientconfig.Context
	}{
		{name: "another user's session is kept with its user", before: grace, url: url, want: grace},
		{name: "a context without a session gets the admin",
			before: clientconfig.Context{Server: url, User: "grace@idp.example.test", Project: "ml"}, url: url,
			want: clientconfig.Context{Server: url, User: DevAdminEmail, Project: "ml", Gateway: gateway}},
		{name: "a reset starts over", before: grace, url: url, reset: true,
			want: clientconfig.Context{Server: url, User: DevAdminEmail, Gateway: gateway}},
		{name: "a moved server starts over", before: grace, url: "nats://127.0.0.1:5333",
			want: clientconfig.Context{Server: "nats://127.0.0.1:5333", User: DevAdminEmail, Gateway: gateway}},
		{name: "first start", url: url,
			want: clientconfig.Context{Server: url, User: DevAdminEmail, Gateway: gateway}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.before.Server != "" {
				cfg, err := clientconfig.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				cfg.SetContext(DevContextName, tt.before)
				if err := cfg.Save(); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeDevContext(dir, tt.url, gateway, tt.reset); err != nil {
				t.Fatal(err)
			}
			cfg, err := clientconfig.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := cfg.Context(DevContextName)
			if !ok || cfg.CurrentContext != DevContextName {
				t.Fatalf("context %q: found %v, current %q; want it stored and current", DevContextName, ok, cfg.CurrentContext)
			}
			if got.Server != tt.want.Server || got.User != tt.want.User || got.UserID != tt.want.UserID ||
				got.Token != tt.want.Token || !got.TokenExpiresAt.Equal(tt.want.TokenExpiresAt) ||
				got.Project != tt.want.Project || got.Gateway != tt.want.Gateway {
				t.Fatalf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}
