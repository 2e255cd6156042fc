package context

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestUse(t *testing.T) {
	ios, _, _, errOut := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	if err := cmdtest.Execute(NewCmdUse(f, nil), "prod"); err != nil {
		t.Fatal(err)
	}
	if got := reload(t, cfg).CurrentContext; got != "prod" {
		t.Fatalf("saved current context %q; want prod", got)
	}
	if !strings.Contains(errOut.String(), "Current context is now prod") {
		t.Errorf("stderr %q; want a confirmation", errOut.String())
	}

	// GPUAAS_CONTEXT still wins in this shell: say so.
	errOut.Reset()
	t.Setenv("GPUAAS_CONTEXT", "dev")
	if err := cmdtest.Execute(NewCmdUse(f, nil), "prod"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "GPUAAS_CONTEXT=dev still picks dev") {
		t.Errorf("stderr %q; want a note about GPUAAS_CONTEXT", errOut.String())
	}
}

func TestUseUnknown(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	err := cmdtest.Execute(NewCmdUse(f, nil), "staging")
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeNotFound || !strings.Contains(e.Message, `no context "staging"`) ||
		e.Hint != "known contexts: dev, prod" {
		t.Fatalf("got %#v; want not_found naming the known contexts", err)
	}
	if got := reload(t, cfg).CurrentContext; got != "dev" {
		t.Fatalf("current context after a failed use: %q; want dev", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdUse(f, nil)), "requires a context name")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdUse(f, nil), "a", "b"), "too many arguments")
}
