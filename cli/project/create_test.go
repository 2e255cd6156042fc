package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/cli/config"
)

func TestNewCmdCreate(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *CreateOptions
	cmd := NewCmdCreate(f, func(_ context.Context, o *CreateOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "ml", "--json=id"); err != nil {
		t.Fatal(err)
	}
	if got.Name != "ml" || got.Exporter == nil {
		t.Errorf("got name %q exporter %v; want ml and an exporter", got.Name, got.Exporter)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCreate(f, nil)), "requires a project name")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCreate(f, nil), "a", "b"), "too many arguments")
}

func TestSetDefaultIfNone(t *testing.T) {
	tests := []struct {
		name        string
		stored      *config.Context
		active      config.Active
		wantChanged bool
		want        config.Context
	}{
		{"no default yet", &config.Context{Server: "nats://dev:4222"},
			config.Active{Name: "dev", Context: config.Context{Server: "nats://dev:4222"}},
			true, config.Context{Server: "nats://dev:4222", Project: "ml"}},
		{"keeps an existing default", &config.Context{Server: "nats://dev:4222", Project: "dev"},
			config.Active{Name: "dev", Context: config.Context{Server: "nats://dev:4222", Project: "dev"}},
			false, config.Context{Server: "nats://dev:4222", Project: "dev"}},
		{"an override is not a stored default", &config.Context{Server: "nats://dev:4222"},
			config.Active{Name: "dev", Context: config.Context{Server: "nats://dev:4222", Project: "from-flag"}},
			true, config.Context{Server: "nats://dev:4222", Project: "ml"}},
		{"no context yet", nil,
			config.Active{Name: "dev", Context: config.Context{Server: config.DefaultServer}},
			true, config.Context{Server: config.DefaultServer, Project: "ml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			_, cfg := cmdtest.ConfigFactory(t, ios, tt.stored)
			if changed := setDefaultIfNone(cfg, tt.active, "ml"); changed != tt.wantChanged {
				t.Errorf("got changed %v; want %v", changed, tt.wantChanged)
			}
			if got, _ := cfg.Context("dev"); got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}
