package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
	"github.com/gpuaas/gpuaas/tui/backend"
)

// livePublish publishes the app manifest manifest as a platform app
// (docs/apps.md, "Publishing apps") and, with promote, promotes it.
func livePublish(t *testing.T, admin *api.Client, manifest string, promote bool) api.App {
	t.Helper()
	app, err := admin.AppPublish(t.Context(), api.AppPublishRequest{Manifest: manifest, Platform: true})
	if err != nil {
		t.Fatal(err)
	}
	if promote {
		if app, err = admin.AppPromote(t.Context(), api.AppRef{App: app.Name}); err != nil {
			t.Fatal(err)
		}
	}
	return *app
}

// notebookManifest is the published app the live tests run: a command,
// an environment, a port and one GPU, all of which the workload must get
// from the stored manifest.
const notebookManifest = "name: notebook\nimage: tiny\ncommand: [/bin/sleep]\nargs: [\"600\"]\nenv: {GREETING: hi}\n" +
	"ports:\n  - {name: web, port: 8080, protocol: http}\ngpus: 1\n"

// TestDashboardRunsPublishedAppsAgainstControld drives the dashboard over
// a real controld (Postgres, NATS with auth, the registry): a on an
// active allocation lists the published apps app.list offers (a promoted
// one; not an image without an app, an app only published, nor a
// deprecated one); enter, y runs the app as `gpuaas app run notebook
// --alloc ID` does, so the workload has the stored manifest's command,
// environment and GPUs and shows in the details with the app's port; after its image is
// revoked, y again is refused, the status line says why, and nothing more
// is started.
func TestDashboardRunsPublishedAppsAgainstControld(t *testing.T) {
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	env := controldtest.Start(t, controldtest.Options{Registry: controld.RegistryConfig{Addr: srv.Addr()}})
	ctx := t.Context()
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	liveApp(t, admin, "tiny")    // the image the apps run
	liveApp(t, admin, "imgonly") // runnable as an image, but no app
	livePublish(t, admin, notebookManifest, true)
	livePublish(t, admin, "name: staged-app\nimage: tiny\n", false)
	livePublish(t, admin, "name: old-app\nimage: tiny\n", true)
	if _, err := admin.AppDeprecate(ctx, api.AppRef{App: "old-app"}); err != nil {
		t.Fatal(err)
	}
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}

	m := New(Options{Backend: backend.New(env.UserClient(t, env.Admin.ID, env.AdminToken)), Context: ctx, Refresh: time.Hour})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(160, 40))
	scr := recordScreen(tm)
	scr.wait(t, 0, a.ID, "live")
	scr.wait(t, scr.press(tm, "enter"), "timeline")

	// The catalog: the promoted app with its image, trust and port.
	at := scr.press(tm, "a")
	scr.wait(t, at, "Run an app on "+a.ID, "notebook", "8080/http", "verified")
	scr.mu.Lock()
	picker := scr.buf.String()[at:]
	scr.mu.Unlock()
	for _, no := range []string{"imgonly", "staged-app", "old-app"} {
		if strings.Contains(picker, no) {
			t.Errorf("the picker offers %s; app.list does not:\n%s", no, picker)
		}
	}

	scr.wait(t, scr.press(tm, "enter"), "Run notebook on "+a.ID+"? (y/n)")
	scr.wait(t, scr.press(tm, "y"), "workload w-")
	ps, err := admin.AppPs(ctx, api.AppPsRequest{AllocationID: a.ID})
	if err != nil || len(ps.Workloads) != 1 {
		t.Fatalf("app.ps after y: %+v, %v; want one workload", ps, err)
	}
	w := ps.Workloads[0]
	if w.Name != "notebook" || w.Image != "tiny" || !slices.Equal(w.Command, []string{"/bin/sleep", "600"}) ||
		!slices.Equal(w.EnvNames, []string{"GREETING"}) || w.GPUs != 1 {
		t.Fatalf("the workload %+v; want notebook's manifest: tiny, /bin/sleep 600, GREETING, 1 GPU", w)
	}
	scr.wait(t, 0, w.ID, "ports 8080/http") // in the details: the app's port

	// Its image revoked since: app.run refuses, the status line says so.
	scr.wait(t, scr.press(tm, "a"), "8080/http")
	scr.wait(t, scr.press(tm, "enter"), "Run notebook on "+a.ID+"? (y/n)")
	if _, err := admin.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny", Reason: "CVE-2026-0001"}); err != nil {
		t.Fatal(err)
	}
	scr.wait(t, scr.press(tm, "y"), "app run notebook on "+a.ID+": image tiny", "is revoked")
	if ps, err := admin.AppPs(ctx, api.AppPsRequest{AllocationID: a.ID}); err != nil || len(ps.Workloads) != 1 {
		t.Fatalf("app.ps after the refusal: %+v, %v; want only the first workload", ps, err)
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
	if !final.flashErr || !strings.Contains(final.flash, "is revoked") {
		t.Fatalf("the status line: %q (error %v); want the refusal", final.flash, final.flashErr)
	}
}
