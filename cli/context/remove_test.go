package context

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestRemove(t *testing.T) {
	ios, _, _, errOut := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	if err := cmdtest.Execute(NewCmdRemove(f, nil), "prod"); err != nil {
		t.Fatal(err)
	}
	saved := reload(t, cfg)
	if _, ok := saved.Contexts["prod"]; ok || saved.CurrentContext != "dev" {
		t.Fatalf("after removing prod: %+v; want dev alone and current", saved)
	}
	// Removing the current context leaves none current, and says so.
	if err := cmdtest.Execute(NewCmdAdd(f, nil), "lab", "--server", "nats://a:4222"); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if err := cmdtest.Execute(NewCmdRemove(f, nil), "dev"); err != nil {
		t.Fatal(err)
	}
	if saved := reload(t, cfg); saved.CurrentContext != "" || len(saved.Contexts) != 1 {
		t.Fatalf("after removing the current context: %+v; want lab alone, none current", saved)
	}
	if !strings.Contains(errOut.String(), "gpuaas context use NAME") {
		t.Errorf("stderr %q; want a pointer to `context use`", errOut.String())
	}
	err := cmdtest.Execute(NewCmdRemove(f, nil), "dev")
	if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), `no context "dev"`) {
		t.Fatalf("removing an unknown context got %v; want not_found", err)
	}
}
