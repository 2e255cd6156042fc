package controld_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// appsEnv is imageEnv with a promoted, verified platform image tiny; carol,
// an owner of the test project (bob is a member); and dave's project
// other with its own image secret.
type appsEnv struct {
	*imageEnv
	carol, dave *api.Client
	secretRef   string
	secretID    string
}

func newAppsEnv(t *testing.T) *appsEnv {
	t.Helper()
	e := &appsEnv{imageEnv: newImageEnv(t)}
	ctx := t.Context()
	ref, _ := e.push(t, "gpuaas/tiny", "tiny")
	if _, err := e.admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: ref, Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, e.admin, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	carol, carolToken := e.env.AddUser(t, "carol@example.test", api.RoleUser)
	if _, err := e.admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: carol.Email, Role: api.ProjectOwner}); err != nil {
		t.Fatal(err)
	}
	e.carol = e.env.Client(carolToken, api.WithProject(controldtest.ProjectName))
	_, daveToken := e.env.AddUser(t, "dave@example.test", api.RoleUser)
	if _, err := e.env.Client(daveToken).ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	e.dave = e.env.Client(daveToken, api.WithProject("other"))
	secret, _ := e.push(t, "other/secret", "secret")
	img, err := e.dave.ImagePublish(ctx, api.ImagePublishRequest{Name: "secret", Ref: secret})
	if err != nil {
		t.Fatal(err)
	}
	e.secretRef, e.secretID = img.Ref, img.ID
	return e
}

// written counts what a refused publish must not have written.
func (e *appsEnv) written(t *testing.T) [3]int {
	t.Helper()
	var n [3]int
	for i, q := range []string{`SELECT count(*) FROM apps`, `SELECT count(*) FROM audit_logs WHERE target_type = 'app'`,
		`SELECT count(*) FROM outbox_events WHERE kind = 'app.state'`} {
		if err := e.env.Server.Pool().QueryRow(t.Context(), q).Scan(&n[i]); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestAppPublishRefusesBadManifests: each bad manifest is refused naming
// the field, and nothing is written: an unknown key, a tag without a
// digest, port 80, an image not in the catalog, another project's image
// (by reference and by id; answered as one not in the catalog), a platform app of a project's image, a name
// already published; and a member may not publish their project's apps.
func TestAppPublishRefusesBadManifests(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	if _, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: taken\nimage: tiny\n"}); err != nil {
		t.Fatal(err)
	}
	before := e.written(t)
	tests := []struct {
		name     string
		c        *api.Client
		req      api.AppPublishRequest
		want     error
		wantText string
	}{
		{name: "unknown key", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: tiny\ncolour: red\n"}, want: api.ErrInvalidArgument, wantText: "colour"},
		{name: "tag without digest", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: 127.0.0.1:5000/gpuaas/tiny:latest\n"}, want: api.ErrInvalidArgument, wantText: "image"},
		{name: "port 80", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: tiny\nports:\n  - {name: web, port: 80}\n"}, want: api.ErrInvalidArgument, wantText: "ports[0].port"},
		{name: "unknown image", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: ghost\n"}, want: api.ErrInvalidArgument, wantText: "image: ghost"},
		{name: "another project's image by ref", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: " + e.secretRef + "\n"}, want: api.ErrInvalidArgument, wantText: "not in the catalog"},
		{name: "another project's image by id", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: " + e.secretID + "\n"}, want: api.ErrInvalidArgument, wantText: "not in the catalog"},
		{name: "platform app of a project's image", c: e.admin, req: api.AppPublishRequest{Manifest: "name: a\nimage: " + e.secretRef + "\n", Platform: true}, want: api.ErrInvalidArgument, wantText: "platform app runs a platform image"},
		{name: "name already published", c: e.carol, req: api.AppPublishRequest{Manifest: "name: taken\nimage: tiny\n"}, want: api.ErrConflict, wantText: "name: an app named taken"},
		{name: "member publishes", c: e.bob, req: api.AppPublishRequest{Manifest: "name: a\nimage: tiny\n"}, want: api.ErrForbidden, wantText: "owners"},
		{name: "user publishes for the platform", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: tiny\n", Platform: true}, want: api.ErrForbidden, wantText: "operators"},
		{name: "mounts", c: e.carol, req: api.AppPublishRequest{Manifest: "name: a\nimage: tiny\nmounts:\n  - {volume: data, path: /data}\n"}, want: api.ErrInvalidArgument, wantText: "mounts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.AppPublish(ctx, tt.req)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("got %v; want %v naming %q", err, tt.want, tt.wantText)
			}
			if got := e.written(t); got != before {
				t.Errorf("apps, audit rows, events: %v; want %v (nothing written)", got, before)
			}
		})
	}
}

// TestPublishedAppLifecycleAndRun: an operator's platform app named as
// an image (tiny) is published (not listed), promoted (listed for a
// member, `app run tiny` runs its manifest: the app wins over the image),
// and stops running when its image is revoked (trust is the image's);
// a project's owner promotes its own app, a member may not (forbidden).
func TestPublishedAppLifecycleAndRun(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	manifest := "name: tiny\nimage: tiny\ncommand: [/bin/httpd]\nargs: [-f, -p, \"8080\"]\nenv: {PORT: \"8080\"}\n" +
		"ports:\n  - {name: web, port: 8080, protocol: http}\ngpus: 1\nreadiness: {http: /, port: 8080}\n"
	app, err := e.admin.AppPublish(ctx, api.AppPublishRequest{Manifest: manifest, Platform: true})
	if err != nil {
		t.Fatal(err)
	}
	if app.Lifecycle != api.ImagePublished || app.Trust != api.TrustVerified || app.Runnable || !strings.Contains(app.Ref, "@sha256:") {
		t.Fatalf("published: %+v; want published, its image verified, not runnable", app)
	}
	list := func(c *api.Client) []string {
		t.Helper()
		got, err := c.AppList(ctx, api.AppListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range got.Apps {
			names = append(names, a.Name)
		}
		return names
	}
	if got := list(e.bob); len(got) != 0 {
		t.Errorf("app list before promote: %v; want none", got)
	}
	a, err := e.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	// Staged (published, not promoted), the app takes nothing from the
	// image of its name: `app run tiny` runs the image as before.
	if w, err := e.bob.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "staged"}); err != nil ||
		slices.Equal(w.Command, []string{"/bin/httpd", "-f", "-p", "8080"}) || w.Digest != app.Digest {
		t.Errorf("app run tiny while the app tiny is staged: %+v, %v; want the image tiny run as it is", w, err)
	}
	if _, err := e.bob.AppPromote(ctx, api.AppRef{App: "tiny"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a member promotes an unpromoted platform app: %v; want not_found (not theirs to see)", err)
	}
	if _, err := e.admin.AppPromote(ctx, api.AppRef{App: "tiny"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bob.AppPromote(ctx, api.AppRef{App: "tiny"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a member promotes a platform app: %v; want forbidden", err)
	}
	if got := list(e.bob); !slices.Equal(got, []string{"tiny"}) {
		t.Errorf("app list after promote: %v; want tiny", got)
	}

	w, err := e.bob.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Env: map[string]string{"EXTRA": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "tiny" || !slices.Equal(w.Command, []string{"/bin/httpd", "-f", "-p", "8080"}) || w.GPUs != 1 ||
		w.Readiness == nil || w.Readiness.Port != 8080 || !slices.Equal(w.EnvNames, []string{"EXTRA", "PORT"}) || w.Digest != app.Digest {
		t.Errorf("app run tiny: %+v; want the app's manifest (command, 1 GPU, readiness, env PORT and EXTRA, its digest)", w)
	}

	// A project's own app: its owner publishes and promotes, a member may not.
	notes, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: notes\nimage: tiny\ncommand: [/hello]\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.bob.AppPromote(ctx, api.AppRef{App: "notes"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a member promotes the project's app: %v; want forbidden", err)
	}
	if _, err := e.bob.AppRun(ctx, api.AppRunRequest{Image: "notes", AllocationID: a.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("app run notes (an unpromoted app, no image of that name): %v; want not_found", err)
	}
	// An app's id names that app only: one that is no app here is not
	// looked up as an image's name.
	if _, err := e.bob.AppRun(ctx, api.AppRunRequest{Image: ids.New("app"), AllocationID: a.ID}); !errors.Is(err, api.ErrNotFound) ||
		!strings.Contains(err.Error(), "no app app-") {
		t.Errorf("app run of an app id that is no app: %v; want not_found, no app", err)
	}
	if _, err := e.bob.AppRun(ctx, api.AppRunRequest{Image: notes.ID, AllocationID: a.ID}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "not promoted") {
		t.Errorf("app run of a published, unpromoted app by its id: %v; want refused, not promoted", err)
	}
	if _, err := e.carol.AppPromote(ctx, api.AppRef{App: "notes"}); err != nil {
		t.Fatal(err)
	}
	if got := list(e.bob); !slices.Equal(got, []string{"tiny", "notes"}) {
		t.Errorf("app list: %v; want tiny then the project's notes", got)
	}
	if _, err := e.dave.AppDescribe(ctx, api.AppRef{App: "notes"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("another project's member gets notes: %v; want not_found", err)
	}

	// Revoking the image: the app stays promoted but does not run.
	if _, err := e.admin.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny", Reason: "CVE-1"}); err != nil {
		t.Fatal(err)
	}
	got, err := e.bob.AppDescribe(ctx, api.AppRef{App: "tiny"})
	if err != nil || got.Trust != api.TrustRevoked || got.Runnable || got.Lifecycle != api.ImagePromoted {
		t.Errorf("app get tiny after the revoke: %+v, %v; want promoted, trust revoked, not runnable", got, err)
	}
	if got := list(e.bob); len(got) != 0 {
		t.Errorf("app list after the revoke: %v; want none", got)
	}
	if _, err := e.bob.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "again"}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("app run of an app whose image is revoked: %v; want refused, revoked", err)
	}
}
