package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// TestAppListShowsRunnableApps: against a real controld and registry,
// `app list` shows the published apps a workload may run (promoted, their
// image promoted and verified) and none of the others (the app only
// published; its image published only, verified but not promoted, or
// revoked), piped and with --json; `app ps` is no longer `app list`.
func TestAppListShowsRunnableApps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts controld")
	}
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	reg, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	env := controldtest.Start(t, controldtest.Options{Registry: registry.Settings{Addr: srv.Addr()}})
	c := env.Client(env.AdminToken, api.WithProject(controldtest.ProjectName))
	publish := func(name string, verify, promote, revoke bool) {
		t.Helper()
		img, err := registry.Tiny(map[string]string{"bin/hello": name})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := reg.Push(t.Context(), "apps/"+name, img)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ImagePublish(t.Context(), api.ImagePublishRequest{Name: name, Ref: ref}); err != nil {
			t.Fatal(err)
		}
		if verify {
			if _, err := c.ImageVerify(t.Context(), api.ImageChangeRequest{Image: name}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := c.ImageGet(t.Context(), api.ImageRef{Image: name})
				if err != nil {
					t.Fatal(err)
				}
				if got.Trust == api.TrustVerified {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("image %s: still %+v", name, got)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		for _, step := range []struct {
			do bool
			fn func() error
		}{
			{promote, func() error { _, err := c.ImagePromote(t.Context(), api.ImageChangeRequest{Image: name}); return err }},
			{true, func() error {
				_, err := c.AppPublish(t.Context(), api.AppPublishRequest{Manifest: "name: " + name + "\nimage: " + name + "\n"})
				return err
			}},
			{verify && name != "draft", func() error { _, err := c.AppPromote(t.Context(), api.AppRef{App: name}); return err }},
			{revoke, func() error {
				_, err := c.ImageRevoke(t.Context(), api.ImageChangeRequest{Image: name, Reason: "test"})
				return err
			}},
		} {
			if step.do {
				if err := step.fn(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
	}
	publish("web", true, true, false)
	publish("notebook", true, true, false)
	publish("fresh", false, false, false)
	publish("checked", true, false, false)
	publish("pulled", true, true, true)
	publish("draft", true, true, false)

	ios, _, out, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { return c, nil }
	if err := cmdtest.Execute(NewCmdApp(f), "list"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		cols := strings.Split(line, "\t")
		if len(cols) != len(listPiped) || cols[1] != controldtest.ProjectName || cols[2] != cols[0] || !strings.Contains(cols[3], "@sha256:") ||
			cols[4] != api.ImagePromoted || cols[5] != api.TrustVerified || !strings.HasPrefix(cols[6], "app-") {
			t.Errorf("piped line %q: want %d columns %v", line, len(listPiped), listPiped)
		}
		names = append(names, cols[0])
	}
	if got := strings.Join(names, ","); !sameSet(got, "web,notebook") {
		t.Errorf("app list: %s; want web and notebook only", got)
	}
	out.Reset()
	if err := cmdtest.Execute(NewCmdApp(f), "list", "--json", "name,trust,lifecycle"); err != nil {
		t.Fatal(err)
	}
	var apps []api.App
	if err := json.Unmarshal(out.Bytes(), &apps); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	names = nil
	for _, a := range apps {
		if a.Trust != api.TrustVerified || a.Lifecycle != api.ImagePromoted {
			t.Errorf("--json lists %+v", a)
		}
		names = append(names, a.Name)
	}
	if got := strings.Join(names, ","); !sameSet(got, "web,notebook") {
		t.Errorf("app list --json: %s; want web and notebook only", got)
	}
}

func sameSet(a, b string) bool {
	x, y := strings.Split(a, ","), strings.Split(b, ",")
	if len(x) != len(y) {
		return false
	}
	for _, s := range x {
		if !strings.Contains(","+b+",", ","+s+",") {
			return false
		}
	}
	return true
}
