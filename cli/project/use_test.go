package project

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func TestNewCmdUse(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *UseOptions
	if err := cmdtest.Execute(NewCmdUse(f, func(_ context.Context, o *UseOptions) error { got = o; return nil }), "ml"); err != nil {
		t.Fatal(err)
	}
	if got.Project != "ml" {
		t.Errorf("got %q; want ml-team", got.Project)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdUse(f, nil)), "requires a project name")
}

// TestProjectUseOverSSHSetsServerSideDefault is the regression test of
// "`project use` over SSH fails with `save config: no path (use Load)`":
// `project use` sets the default project controld keeps, so it works with
// the in-memory config a gateway session has, and is seen from any
// client. Locally it also unpins the context's project, which would hide
// the default; a bad name changes nothing.
func TestProjectUseOverSSHSetsServerSideDefault(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := context.Background()
	admin := env.Client(env.AdminToken, api.WithProject(""))
	if _, err := admin.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "ml-team"}); err != nil {
		t.Fatal(err)
	}
	defaultOf := func() string {
		t.Helper()
		who, err := admin.Whoami(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if who.DefaultProject == nil {
			return ""
		}
		return who.DefaultProject.Name
	}
	run := func(f *cmdutil.Factory, args ...string) error {
		f.Client = func() (*api.Client, error) { return admin, nil }
		return cmdtest.Execute(NewCmdUse(f, nil), args...)
	}

	// As over SSH: a config with no file behind it.
	ios, _, _, errOut := cmdtest.Streams(false)
	cmdtest.ClearEnv(t)
	f := cmdtest.Factory(ios)
	f.Config = func() (*clientconfig.Config, error) {
		return &clientconfig.Config{CurrentContext: "ssh", Contexts: map[string]clientconfig.Context{"ssh": {UserID: env.Admin.ID}}}, nil
	}
	if err := run(f, "ml-team"); err != nil {
		t.Fatalf("project use ml-team with an in-memory config: %v", err)
	}
	if got := defaultOf(); got != "ml-team" {
		t.Fatalf("default project after project use ml: %q; want ml-team", got)
	}
	if !strings.Contains(errOut.String(), "Your default project is now ml-team") {
		t.Errorf("stderr %q; want the new default", errOut.String())
	}

	// Locally: the context's pinned project is unpinned, in the file.
	ios, _, _, errOut = cmdtest.Streams(false)
	f, cfg := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Project: "ml-team"})
	cfg.CurrentContext = "dev"
	if err := run(f, controldtest.ProjectName); err != nil {
		t.Fatal(err)
	}
	if got := defaultOf(); got != controldtest.ProjectName {
		t.Errorf("default project: %q; want %s", got, controldtest.ProjectName)
	}
	saved, err := clientconfig.Load(filepath.Dir(cfg.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := saved.Context("dev"); c.Project != "" {
		t.Errorf("the saved context still pins %q; want no project", c.Project)
	}
	if !strings.Contains(errOut.String(), "no longer pins project ml-team") {
		t.Errorf("stderr %q; want it to say the context's project was unpinned", errOut.String())
	}

	// GPUAAS_PROJECT still wins, and the command says so.
	ios, _, _, errOut = cmdtest.Streams(false)
	f, _ = cmdtest.ConfigFactory(t, ios, &clientconfig.Context{})
	t.Setenv(clientconfig.EnvProject, "elsewhere")
	if err := run(f, "ml-team"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "project elsewhere is still set here") {
		t.Errorf("stderr %q; want a note that GPUAAS_PROJECT wins", errOut.String())
	}

	// Bad input: a clear error, and the default stays.
	for _, bad := range []string{"nope", " "} {
		ios, _, _, _ = cmdtest.Streams(false)
		f, _ = cmdtest.ConfigFactory(t, ios, &clientconfig.Context{})
		err := run(f, bad)
		if !errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("project use %q: %v; want not found or invalid argument", bad, err)
		}
		if got := defaultOf(); got != "ml-team" {
			t.Errorf("default project after project use %q: %q; want ml-team unchanged", bad, got)
		}
	}
}
