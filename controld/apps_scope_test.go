package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// TestAppVerbsRefuseANameInBothScopes: with an app nb both the
// platform's and the test project's, an operator working in the project
// who names nb alone is refused naming both, and nothing moves;
// --platform and --project each pick theirs. A member who cannot see the
// platform's (not promoted) gets the project's: the refusal tells no one
// of an app they may not see.
func TestAppVerbsRefuseANameInBothScopes(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	platform, err := e.admin.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: nb\nimage: tiny\n", Platform: true})
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: nb\nimage: tiny\n"})
	if err != nil {
		t.Fatal(err)
	}
	op := e.env.Client(e.env.AdminToken, api.WithProject(controldtest.ProjectName))
	before := e.written(t)
	wantBoth := "nb is both a platform app and an app of project " + controldtest.ProjectName + ": say --platform or --project"
	if _, err := op.AppDescribe(ctx, api.AppRef{App: "nb"}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), wantBoth) {
		t.Fatalf("get nb: %v; want %q", err, wantBoth)
	}
	for _, call := range []func(*api.Client, api.AppRef) (*api.App, error){
		func(c *api.Client, r api.AppRef) (*api.App, error) { return c.AppPromote(ctx, r) },
		func(c *api.Client, r api.AppRef) (*api.App, error) { return c.AppDeprecate(ctx, r) },
		func(c *api.Client, r api.AppRef) (*api.App, error) { return c.AppRetire(ctx, r) },
	} {
		if got, err := call(op, api.AppRef{App: "nb"}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), wantBoth) {
			t.Fatalf("a move of nb: %+v, %v; want %q", got, err, wantBoth)
		}
	}
	if got := e.written(t); got != before {
		t.Fatalf("apps, audit rows, events after refusals: %v; want %v", got, before)
	}
	_, err = op.AppDescribe(ctx, api.AppRef{App: "nb", Platform: true, Project: controldtest.ProjectName})
	wantErr(t, "--platform and --project", err, api.ErrInvalidArgument)
	if got, err := op.AppDescribe(ctx, api.AppRef{App: "nb", Platform: true}); err != nil || got.ID != platform.ID {
		t.Fatalf("get nb --platform: %+v, %v; want %s", got, err, platform.ID)
	}
	if got, err := op.AppDescribe(ctx, api.AppRef{App: "nb", Project: controldtest.ProjectName}); err != nil || got.ID != own.ID {
		t.Fatalf("get nb -p: %+v, %v; want %s", got, err, own.ID)
	}
	// An id names one app, and only in the scope asked for.
	_, err = op.AppDescribe(ctx, api.AppRef{App: own.ID, Platform: true})
	wantErr(t, "a project's app's id with --platform", err, api.ErrNotFound)
	if got, err := op.AppDeprecate(ctx, api.AppRef{App: "nb", Platform: true}); err != nil || got.ID != platform.ID || got.Lifecycle != api.ImageDeprecated {
		t.Fatalf("deprecate nb --platform: %+v, %v", got, err)
	}
	if got, err := op.AppDescribe(ctx, api.AppRef{App: own.ID}); err != nil || got.Lifecycle != api.ImagePublished {
		t.Fatalf("the project's nb after the platform's was deprecated: %+v, %v; want it published", got, err)
	}
	// carol cannot see the platform's nb (not promoted): hers, no refusal.
	if got, err := e.carol.AppDescribe(ctx, api.AppRef{App: "nb"}); err != nil || got.ID != own.ID {
		t.Fatalf("carol gets nb: %+v, %v; want her project's %s", got, err, own.ID)
	}
}

// TestImageVerbsRefuseANameInBothScopes: image verbs share the lookup:
// an image tool both the platform's and the project's is refused by
// name alone and picked with --platform or --project.
func TestImageVerbsRefuseANameInBothScopes(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	ref, _ := e.push(t, "gpuaas/tool", "tool")
	platform, err := e.admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tool", Ref: ref, Platform: true})
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.bob.ImagePublish(ctx, api.ImagePublishRequest{Name: "tool", Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	op := e.env.Client(e.env.AdminToken, api.WithProject(controldtest.ProjectName))
	wantBoth := "tool is both a platform image and an image of project " + controldtest.ProjectName
	if _, err := op.ImageGet(ctx, api.ImageRef{Image: "tool"}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), wantBoth) {
		t.Fatalf("get tool: %v; want %q", err, wantBoth)
	}
	if got, err := op.ImageDeprecate(ctx, api.ImageChangeRequest{Image: "tool"}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), wantBoth) {
		t.Fatalf("deprecate tool: %+v, %v; want %q", got, err, wantBoth)
	}
	if got, err := op.ImageDeprecate(ctx, api.ImageChangeRequest{Image: "tool", Platform: true}); err != nil || got.ID != platform.ID {
		t.Fatalf("deprecate tool --platform: %+v, %v; want %s", got, err, platform.ID)
	}
	if got, err := op.ImageGet(ctx, api.ImageRef{Image: "tool", Project: controldtest.ProjectName}); err != nil ||
		got.ID != own.ID || got.Lifecycle != api.ImagePublished {
		t.Fatalf("get tool -p: %+v, %v; want %s, published", got, err, own.ID)
	}
}

// TestAppNamesShapedLikeIDsAreRefused: a name with an id's shape, of a
// kind that exists or not, is refused at publish naming the field, and
// nothing is written; names that merely start like one are kept.
func TestAppNamesShapedLikeIDsAreRefused(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	before := e.written(t)
	for _, name := range []string{ids.New(ids.Workload), ids.New("app"), ids.New("img"), ids.New(ids.Allocation), "zz-0123456789ab"} {
		_, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: " + name + "\nimage: tiny\n"})
		if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), `name: "`+name+`" has the shape of an id`) {
			t.Errorf("publish %s: %v; want invalid_argument naming the name", name, err)
		}
	}
	if got := e.written(t); got != before {
		t.Fatalf("apps, audit rows, events after refusals: %v; want %v", got, before)
	}
	for _, name := range []string{"w-lab", "app-server", "img-0123456789abc", "jupyter-0123456789ab"} {
		if _, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: " + name + "\nimage: tiny\n"}); err != nil {
			t.Errorf("publish %s: %v", name, err)
		}
	}
}

// TestPublishRefOfAnotherProjectsImageAnswersAsNobodys: an app manifest
// naming another project's image, by reference or by id, gets the answer
// a reference to no image gets (the reference itself aside); an image
// publish of another project's REPOSITORY@digest answers as one of a
// digest nobody holds: neither reads another project's rows.
func TestPublishRefOfAnotherProjectsImageAnswersAsNobodys(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	repo, _, _ := strings.Cut(e.secretRef, "@")
	nobodyRef := repo + "@sha256:" + strings.Repeat("ab", 32)
	answer := func(image string) api.Error {
		t.Helper()
		_, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: a\nimage: " + image + "\n"})
		var ae *api.Error
		if !errors.As(err, &ae) {
			t.Fatalf("publish of %s: %v; want an api error", image, err)
		}
		return api.Error{Code: ae.Code, Message: strings.ReplaceAll(ae.Message, image, "IMAGE"), Hint: strings.ReplaceAll(ae.Hint, image, "IMAGE")}
	}
	for _, tt := range []struct{ name, theirs, nobodys string }{
		{"by reference", e.secretRef, nobodyRef},
		{"by id", e.secretID, ids.New("img")},
	} {
		if theirs, nobodys := answer(tt.theirs), answer(tt.nobodys); theirs != nobodys {
			t.Errorf("%s: another project's image answers %+v; no image %+v", tt.name, theirs, nobodys)
		}
	}
	theirs, err := e.carol.ImagePublish(ctx, api.ImagePublishRequest{Name: "theirs", Ref: e.secretRef})
	if err != nil {
		t.Fatalf("image publish of another project's reference: %v", err)
	}
	nobodys, err := e.carol.ImagePublish(ctx, api.ImagePublishRequest{Name: "nobodys", Ref: nobodyRef})
	if err != nil {
		t.Fatalf("image publish of a reference nobody holds: %v", err)
	}
	if theirs.Scope != nobodys.Scope || theirs.Project != nobodys.Project || theirs.Lifecycle != nobodys.Lifecycle ||
		theirs.Trust != nobodys.Trust || theirs.TrustReason != nobodys.TrustReason || theirs.Source != nobodys.Source {
		t.Errorf("image publish: another project's reference answers %+v; one nobody holds %+v", theirs, nobodys)
	}
}

// TestRunOrderResolvesAsARun: the CLI's check before it rents for a run
// (api.AppRef.RunOrder, api.ImageRef.RunOrder) is answered as app.run
// resolves the name, not refused for a name in both scopes: the promoted
// app, the project's first; the project's image.
func TestRunOrderResolvesAsARun(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	platform, err := e.admin.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: nb\nimage: tiny\n", Platform: true})
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: nb\nimage: tiny\n"})
	if err != nil {
		t.Fatal(err)
	}
	op := e.env.Client(e.env.AdminToken, api.WithProject(controldtest.ProjectName))
	if got, err := op.AppDescribe(ctx, api.AppRef{App: "nb", RunOrder: true}); err != nil || got.ID != own.ID {
		t.Fatalf("nb in run order, neither promoted: %+v, %v; want the project's %s", got, err, own.ID)
	}
	if _, err := op.AppPromote(ctx, api.AppRef{App: "nb", Platform: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := op.AppDescribe(ctx, api.AppRef{App: "nb", RunOrder: true}); err != nil || got.ID != platform.ID {
		t.Fatalf("nb in run order, the platform's promoted: %+v, %v; want it, %s", got, err, platform.ID)
	}
	if _, err := op.AppPromote(ctx, api.AppRef{App: "nb", Project: controldtest.ProjectName}); err != nil {
		t.Fatal(err)
	}
	if got, err := op.AppDescribe(ctx, api.AppRef{App: "nb", RunOrder: true}); err != nil || got.ID != own.ID {
		t.Fatalf("nb in run order, both promoted: %+v, %v; want the project's %s", got, err, own.ID)
	}
	// Without RunOrder the name is still refused.
	if _, err := op.AppDescribe(ctx, api.AppRef{App: "nb"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("nb without run order: %v; want invalid_argument", err)
	}
}

// TestNamedProjectLeaksNothing: `image get X -p P` by a caller who is not
// a member of P answers as for a project that does not exist.
func TestNamedProjectLeaksNothing(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	_, daveToken := e.env.AddUser(t, "dave@example.test", api.RoleUser)
	if _, err := e.env.Client(daveToken).ProjectCreate(ctx, api.ProjectCreateRequest{Name: "daves"}); err != nil {
		t.Fatal(err)
	}
	_, there := e.bob.ImageGet(ctx, api.ImageRef{Image: "tool", Project: "daves"})
	_, nowhere := e.bob.ImageGet(ctx, api.ImageRef{Image: "tool", Project: "nosuch"})
	if !errors.Is(there, api.ErrNotFound) || !errors.Is(nowhere, api.ErrNotFound) {
		t.Fatalf("another's project: %v; no project: %v; want not_found both", there, nowhere)
	}
	if strings.ReplaceAll(there.Error(), "daves", "P") != strings.ReplaceAll(nowhere.Error(), "nosuch", "P") {
		t.Fatalf("another's project answers %q, a missing one %q: want the same", there, nowhere)
	}
}
