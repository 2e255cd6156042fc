package clientconfig

import (
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name, configDir, xdg, want string
	}{
		{"explicit", "/etc/gp", "/xdg", "/etc/gp"},
		{"xdg", "", "/xdg", "/xdg/gpuaas"},
		{"home", "", "", filepath.Join(home, ".config", "gpuaas")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			t.Setenv(EnvConfigDir, tt.configDir)
			t.Setenv("XDG_CONFIG_HOME", tt.xdg)
			got, err := Dir()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func testConfig() *Config {
	return &Config{
		CurrentContext: "dev",
		Contexts: map[string]Context{
			"dev":  {Server: "nats://dev:4222", Token: "dev-token", Project: "dev", UserID: "u-1"},
			"prod": {Server: "nats://prod:4222", Token: "prod-token"},
		},
	}
}

func TestActive(t *testing.T) {
	tests := []struct {
		name string
		o    Overrides
		want Active
	}{
		{"current", Overrides{},
			Active{Name: "dev", Exists: true, Context: Context{Server: "nats://dev:4222", Token: "dev-token", Project: "dev", UserID: "u-1"}}},
		{"named context", Overrides{Context: "prod"},
			Active{Name: "prod", Exists: true, Context: Context{Server: "nats://prod:4222", Token: "prod-token"}}},
		{"overrides win", Overrides{Server: "nats://x:1", Token: "t", Project: "p"},
			Active{Name: "dev", Exists: true, Context: Context{Server: "nats://x:1", Token: "t", Project: "p", UserID: "u-1"}}},
		{"unknown context gets the default server", Overrides{Context: "new"},
			Active{Name: "new", Context: Context{Server: DefaultServer}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testConfig().Active(tt.o); got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestActiveEmptyConfig(t *testing.T) {
	got := (&Config{Contexts: map[string]Context{}}).Active(Overrides{})
	want := Active{Name: DefaultContextName, Context: Context{Server: DefaultServer}}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

func TestEnvOverridesAndFlagsPrecedence(t *testing.T) {
	t.Setenv(EnvContext, "prod")
	t.Setenv(EnvServer, "nats://env:4222")
	t.Setenv(EnvToken, "env-token")
	t.Setenv(EnvProject, "env-project")
	env := EnvOverrides()
	if want := (Overrides{Context: "prod", Server: "nats://env:4222", Token: "env-token", Project: "env-project"}); env != want {
		t.Fatalf("got %+v; want %+v", env, want)
	}
	// Flags (--context, --project) win over the environment.
	o := env.Over(Overrides{Context: "dev", Project: "flag-project"})
	got := testConfig().Active(o)
	want := Active{Name: "dev", Exists: true, Context: Context{Server: "nats://env:4222", Token: "env-token", Project: "flag-project", UserID: "u-1"}}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

func TestOverridesAreNotSaved(t *testing.T) {
	dir := t.TempDir()
	c, _ := Load(dir)
	c.SetContext("dev", Context{Server: "nats://dev:4222", Token: "file-token"})
	a := c.Active(Overrides{Token: "env-token", Project: "env-project"})
	c.UpdateActive(a, func(ctx *Context) { ctx.User = "ada@example.com" })
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	got, _ := Load(dir)
	want := Context{Server: "nats://dev:4222", Token: "file-token", User: "ada@example.com"}
	if g := got.Contexts["dev"]; g != want {
		t.Errorf("got %+v; want %+v", g, want)
	}
}
