package controld_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// imageEnv is a controld configured with a registry on loopback, an
// admin, and bob, a member of the test project.
type imageEnv struct {
	env        *controldtest.Env
	srv        *registry.Server
	reg        *registry.Client
	admin, bob *api.Client
}

func newImageEnv(t *testing.T) *imageEnv {
	t.Helper()
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
	admin := env.Client(env.AdminToken)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(t.Context(), api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	return &imageEnv{env: env, srv: srv, reg: reg, admin: admin, bob: env.Client(bobToken, api.WithProject(controldtest.ProjectName))}
}

// push builds a one-layer image and pushes it by digest.
func (e *imageEnv) push(t *testing.T, repo, content string) (string, v1.Image) {
	t.Helper()
	img, err := registry.Tiny(map[string]string{"bin/hello": content})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := e.reg.Push(t.Context(), repo, img)
	if err != nil {
		t.Fatal(err)
	}
	return ref, img
}

// verify queues a verification of name as c and waits until a verifier
// recorded it, returning the image as it then is.
func verify(t *testing.T, c *api.Client, name string) (*api.Image, error) {
	t.Helper()
	img, err := c.ImageVerify(t.Context(), api.ImageChangeRequest{Image: name})
	if err != nil {
		return img, err
	}
	if img.Verification == nil {
		t.Fatalf("verify %s: answered %+v; want a queued verification", name, img)
	}
	return waitImage(t, c, img.ID, func(i *api.Image) bool { return i.Verification == nil }), nil
}

// waitImage polls the image id as c sees it until done holds.
func waitImage(t *testing.T, c *api.Client, id string, done func(*api.Image) bool) *api.Image {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		img, err := c.ImageGet(t.Context(), api.ImageRef{Image: id})
		if err != nil {
			t.Fatal(err)
		}
		if done(img) {
			return img
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s: still %+v (verification %+v)", id, img, img.Verification)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v; want %v", what, err, want)
	}
}

func listed(t *testing.T, c *api.Client, name string) bool {
	t.Helper()
	out, err := c.ImageList(t.Context(), api.ImageListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range out.Images {
		if img.Name == name {
			return true
		}
	}
	return false
}

func TestImagePlatformLifecycle(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	ref, _ := e.push(t, "gpuaas/tiny", "tiny")
	img, err := e.admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: ref, Platform: true})
	if err != nil {
		t.Fatal(err)
	}
	if img.Trust != api.TrustUnverified || img.Lifecycle != api.ImagePublished || img.Ref != ref {
		t.Fatalf("published: %+v", img)
	}
	// Unpromoted, it is not bob's to see, let alone promote.
	if listed(t, e.bob, "tiny") {
		t.Fatal("bob lists an unpromoted platform image")
	}
	_, err = e.bob.ImageGet(ctx, api.ImageRef{Image: "tiny"})
	wantErr(t, "bob's get", err, api.ErrNotFound)
	_, err = e.admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"})
	wantErr(t, "promote unverified", err, api.ErrConflict)
	if img, err = verify(t, e.admin, "tiny"); err != nil || img.Trust != api.TrustVerified ||
		img.Platform != api.ImagePlatform || img.Layers != 1 {
		t.Fatalf("verify: %+v, %v", img, err)
	}
	if img, err = e.admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil || img.Lifecycle != api.ImagePromoted {
		t.Fatalf("promote: %+v, %v", img, err)
	}
	if !listed(t, e.bob, "tiny") {
		t.Fatal("bob does not list the promoted, verified image")
	}
	_, err = e.bob.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny", Reason: "mine"})
	wantErr(t, "bob's revoke", err, api.ErrForbidden)
	_, err = e.admin.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny"})
	wantErr(t, "revoke without a reason", err, api.ErrInvalidArgument)
	if img, err = e.admin.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny", Reason: "CVE-2026-0001"}); err != nil ||
		img.Trust != api.TrustRevoked || img.Lifecycle != api.ImagePromoted || img.TrustReason != "CVE-2026-0001" {
		t.Fatalf("revoke: %+v, %v", img, err)
	}
	if listed(t, e.bob, "tiny") {
		t.Fatal("bob lists a revoked image")
	}
	_, err = e.admin.ImageVerify(ctx, api.ImageChangeRequest{Image: "tiny"})
	wantErr(t, "verify revoked", err, api.ErrConflict)
	got, err := e.admin.ImageGet(ctx, api.ImageRef{Image: img.ID})
	if err != nil || got.StateLine() != "promoted, revoked (CVE-2026-0001)" {
		t.Fatalf("get: %+v, %v", got, err)
	}
}

func TestImageProjectOwnersPromote(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	ref, pushed := e.push(t, "research/tool", "tool")
	// A tag is resolved once, at publish: the digest is what is stored.
	repo, digest, _ := strings.Cut(ref, "@")
	tag, _ := name.NewTag(repo + ":v1")
	if err := remote.Tag(tag, pushed); err != nil {
		t.Fatal(err)
	}
	img, err := e.bob.ImagePublish(ctx, api.ImagePublishRequest{Name: "tool", Ref: "research/tool:v1"})
	if err != nil || img.Scope != api.ImageScopeProject || img.Project != controldtest.ProjectName ||
		img.Ref != ref || img.Digest != digest || img.Source != "research/tool:v1" {
		t.Fatalf("bob publishes: %+v, %v; want ref %s", img, err, ref)
	}
	_, err = e.bob.ImagePublish(ctx, api.ImagePublishRequest{Name: "tool2", Ref: ref, Platform: true})
	wantErr(t, "bob publishes on the platform", err, api.ErrForbidden)
	if img, err = verify(t, e.bob, "tool"); err != nil || img.Trust != api.TrustVerified {
		t.Fatalf("bob verifies: %+v, %v", img, err)
	}
	_, err = e.bob.ImagePromote(ctx, api.ImageChangeRequest{Image: "tool"})
	wantErr(t, "a member's promote", err, api.ErrForbidden)
	// The admin is an owner of the test project.
	if img, err = e.admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tool", Project: controldtest.ProjectName}); err != nil ||
		img.Lifecycle != api.ImagePromoted {
		t.Fatalf("owner promotes: %+v, %v", img, err)
	}
	if !listed(t, e.bob, "tool") {
		t.Fatal("bob does not list the project's image")
	}
}

func TestImageVerifyRecordsTheReason(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	ref, img := e.push(t, "gpuaas/bad", "will be altered")
	if _, err := e.admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "bad", Ref: ref, Platform: true}); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	path, _ := e.srv.BlobPath(ld.String())
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := verify(t, e.admin, "bad")
	if err != nil || got.Trust != api.TrustFailedVerification || got.Lifecycle != api.ImagePublished ||
		!strings.Contains(got.TrustReason, "layer 1 ("+ld.String()+"): digest mismatch") {
		t.Fatalf("verify: %+v, %v", got, err)
	}
	_, err = e.admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "bad"})
	wantErr(t, "promote a failed image", err, api.ErrConflict)
	// With the registry gone the check cannot run: the request stays
	// queued with the registry's error, the trust as it was, and the only
	// rows written are the request's own (its audit row and event).
	before := countEffects(t, e.env)
	e.srv.Close()
	queued, err := e.admin.ImageVerify(ctx, api.ImageChangeRequest{Image: "bad"})
	if err != nil || queued.Verification == nil {
		t.Fatalf("verify without the registry: %+v, %v; want it queued", queued, err)
	}
	deferred := waitImage(t, e.admin, queued.ID, func(i *api.Image) bool {
		return i.Verification != nil && i.Verification.LastError != ""
	})
	if deferred.Trust != api.TrustFailedVerification || deferred.Verification.Attempts < 1 ||
		!deferred.Verification.NextAttemptAt.After(deferred.Verification.RequestedAt) {
		t.Fatalf("deferred: %+v, %+v", deferred, deferred.Verification)
	}
	after := countEffects(t, e.env)
	if want := (effects{audit: before.audit + 1, outbox: before.outbox + 1, keys: before.keys + 1,
		allocations: before.allocations}); after != want {
		t.Fatalf("rows after a verify that could not run: got %+v; want %+v", after, want)
	}
}

func TestImagePublishRefusals(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	ref, _ := e.push(t, "gpuaas/tiny", "tiny")
	before := countEffects(t, e.env)
	for _, tt := range []struct {
		name string
		req  api.ImagePublishRequest
		want error
	}{
		{"bad name", api.ImagePublishRequest{Name: "Tiny Image", Ref: ref}, api.ErrInvalidArgument},
		{"no ref", api.ImagePublishRequest{Name: "tiny"}, api.ErrInvalidArgument},
		{"ref without tag or digest", api.ImagePublishRequest{Name: "tiny", Ref: "gpuaas/tiny"}, api.ErrInvalidArgument},
		{"unknown tag", api.ImagePublishRequest{Name: "tiny", Ref: "gpuaas/tiny:nope"}, api.ErrInvalidArgument},
		{"platform and project", api.ImagePublishRequest{Name: "tiny", Ref: ref, Platform: true, Project: controldtest.ProjectName}, api.ErrInvalidArgument},
		{"unknown project", api.ImagePublishRequest{Name: "tiny", Ref: ref, Project: "ghost"}, api.ErrNotFound},
	} {
		_, err := e.admin.ImagePublish(ctx, tt.req)
		wantErr(t, tt.name, err, tt.want)
	}
	if after := countEffects(t, e.env); after != before {
		t.Fatalf("rows after refusals: got %+v; want %+v", after, before)
	}
	if n := count(t, e.env, `SELECT count(*) FROM images`); n != 0 {
		t.Fatalf("images after refusals: %d", n)
	}
}

func TestSeedImage(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	ref, img := e.push(t, "gpuaas/stock", "stock")
	admin, err := e.admin.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.env.Server.SeedImage(ctx, "stock", ref, admin.User.ID)
	if err != nil || got.Lifecycle != api.ImagePromoted || got.Trust != api.TrustVerified || got.Ref != ref {
		t.Fatalf("seed: %+v, %v", got, err)
	}
	if !listed(t, e.bob, "stock") {
		t.Fatal("bob does not list the seeded image")
	}
	// Seeded again (the next start), an operator's change stays.
	if _, err := e.admin.ImageDeprecate(ctx, api.ImageChangeRequest{Image: "stock"}); err != nil {
		t.Fatal(err)
	}
	if again, err := e.env.Server.SeedImage(ctx, "stock", ref, admin.User.ID); err != nil || again.ID != got.ID || again.Lifecycle != api.ImageDeprecated {
		t.Fatalf("seed again: %+v, %v", again, err)
	}
	// An image that fails verification is not seeded.
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	path, _ := e.srv.BlobPath(ld.String())
	if err := os.WriteFile(path, []byte("not the layer"), 0o600); err != nil {
		t.Fatal(err)
	}
	if bad, err := e.env.Server.SeedImage(ctx, "stock2", ref, admin.User.ID); err == nil || !strings.Contains(err.Error(), "size mismatch") {
		t.Fatalf("seed of a bad image: %+v, %v; want a size mismatch", bad, err)
	}
	if n := count(t, e.env, `SELECT count(*) FROM images WHERE name = 'stock2'`); n != 0 {
		t.Fatalf("rows of the bad seed: %d", n)
	}
}

// TestImageDelegatedSessionHasNoOperatorPower: a session delegated
// through the SSH gateway acts as a user (as for ops.* endpoints), so an
// admin's cannot publish, promote or revoke platform images, nor list them
// all; their own session can.
func TestImageDelegatedSessionHasNoOperatorPower(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	gw, _ := e.env.Gateway(t, "gw-1")
	delegated := e.env.Client(mustUserToken(t, gw, e.env.Admin.ID, userCert(t, e.admin)))
	ref, _ := e.push(t, "gpuaas/tiny", "tiny")
	_, err := delegated.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: ref, Platform: true})
	wantErr(t, "delegated publish", err, api.ErrForbidden)
	if _, err := e.admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: ref, Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, e.admin, "tiny"); err != nil {
		t.Fatal(err)
	}
	_, err = delegated.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"})
	wantErr(t, "delegated promote of an image users do not see", err, api.ErrNotFound)
	_, err = delegated.ImageList(ctx, api.ImageListRequest{All: true})
	wantErr(t, "delegated list --all", err, api.ErrForbidden)
	if _, err := e.admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	_, err = delegated.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny", Reason: "x"})
	wantErr(t, "delegated revoke", err, api.ErrForbidden)
	if got, err := e.admin.ImageGet(ctx, api.ImageRef{Image: "tiny"}); err != nil || got.Trust != api.TrustVerified {
		t.Fatalf("after the refusals: %+v, %v", got, err)
	}
}

// TestImageProjectRefsStayInTheRegistry: a project's image comes from the
// registry controld is configured with; a ref elsewhere would have
// controld fetch whatever address a user names (its network, its
// metadata services). Operators may name another for platform images.
func TestImageProjectRefsStayInTheRegistry(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t)
	ctx := t.Context()
	other := "127.0.0.2:1/x@sha256:" + strings.Repeat("a", 64)
	before := countEffects(t, e.env)
	for _, ref := range []string{other, "169.254.169.254/latest:meta"} {
		_, err := e.bob.ImagePublish(ctx, api.ImagePublishRequest{Name: "elsewhere", Ref: ref})
		wantErr(t, "bob publishes "+ref, err, api.ErrInvalidArgument)
	}
	if after := countEffects(t, e.env); after != before {
		t.Fatalf("rows after refusals: got %+v; want %+v", after, before)
	}
	if img, err := e.admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "elsewhere", Ref: other, Platform: true}); err != nil || img.Ref != other {
		t.Fatalf("an operator's platform image elsewhere: %+v, %v", img, err)
	}
}
