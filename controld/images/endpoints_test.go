package images_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// served is a database with the image catalog's endpoints over it.
type served struct {
	pool *pgxpool.Pool
	endpointtest.Harness
	// priced is the digests RunPrice was asked about.
	priced []string
}

func serveImages(t *testing.T) *served {
	t.Helper()
	s := &served{pool: newPool(t)}
	clock := func() time.Time { return t0 }
	s.Harness = endpointtest.Serve(s.pool, clock, images.Endpoints(images.Deps{DB: s.pool, Now: clock,
		RunPrice: func(_ context.Context, _ store.Querier, digest string) (*api.RunPrice, error) {
			s.priced = append(s.priced, digest)
			return &api.RunPrice{PricePerHourMinor: int64(len(s.priced))}, nil
		}}))
	return s
}

func caller(user, role string) *endpoint.Request {
	return endpointtest.As(user, role, "")
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, s.pool, sql, args...)
}

// TestRevokeEndpointNeedsAReason: a revoke without a reason, or with one
// too long, is refused before anything is read or written; one with a
// reason revokes the image, audits the reason and tells the project's
// members.
func TestRevokeEndpointNeedsAReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveImages(t)
	storetest.Member(t, s.pool, "p-1", "u-1", api.ProjectOwner, t0)
	img, err := images.Publish(ctx, s.pool, images.New{Name: "tiny", ProjectID: "p-1", Repository: "r/tiny", Digest: digestA, By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	revoke := s.Find(t, api.EndpointImageRevoke)
	ann := caller("u-1", api.RoleUser)
	for _, reason := range []string{"", "   ", strings.Repeat("x", 501)} {
		_, err := endpointtest.Mutate[api.Image](ctx, s.Run, revoke, ann, api.ImageChangeRequest{Image: img.ID, Reason: reason})
		if api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("revoke with reason %.10q: got %v; want invalid_argument", reason, err)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs`) + s.count(t, `SELECT count(*) FROM outbox_events`); n != 0 {
		t.Fatalf("refused revokes wrote %d audit rows and events", n)
	}
	if cur, err := images.ByID(ctx, s.pool, img.ID, false); err != nil || cur.Trust != api.TrustUnverified {
		t.Fatalf("after refusals: %+v, %v; want trust unverified", cur, err)
	}

	out, err := endpointtest.Mutate[api.Image](ctx, s.Run, revoke, ann, api.ImageChangeRequest{Image: img.ID, Reason: " leaked key "})
	if err != nil || out.Trust != api.TrustRevoked {
		t.Fatalf("revoke: %+v, %v; want revoked", out, err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2 AND project_id = 'p-1'
		AND detail->>'reason' = 'leaked key'`, api.EndpointImageRevoke, img.ID); n != 1 {
		t.Errorf("audit rows of the revoke with its reason: %d; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2 AND users @> ARRAY['u-1']::text[]`,
		api.EventImage, img.ID); n != 1 {
		t.Errorf("image events told to the project's owner: %d; want 1", n)
	}
}

// TestListAllNeedsAnOperator: listing every image is an operator's; a
// session an admin delegated through the gateway acts as a user and is
// refused too.
func TestListAllNeedsAnOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveImages(t)
	if _, err := images.Publish(ctx, s.pool, images.New{Name: "theirs", ProjectID: "p-2", Repository: "r/t", Digest: digestA, By: "u-1"}, t0); err != nil {
		t.Fatal(err)
	}
	list := s.Find(t, api.EndpointImageList)
	delegated := caller("u-1", api.RoleAdmin)
	delegated.Principal.Delegated = true
	for name, r := range map[string]*endpoint.Request{"user": caller("u-1", api.RoleUser), "delegated admin": delegated} {
		if _, err := endpointtest.Read[api.ImageListResponse](ctx, list, r, api.ImageListRequest{All: true}); api.CodeOf(err) != api.CodeForbidden {
			t.Errorf("%s lists every image: got %v; want forbidden", name, err)
		}
	}
	out, err := endpointtest.Read[api.ImageListResponse](ctx, list, caller("u-1", api.RoleAdmin), api.ImageListRequest{All: true})
	if err != nil || len(out.Images) != 1 || out.Images[0].Name != "theirs" {
		t.Fatalf("admin lists every image: %+v, %v; want project p-2's image", out, err)
	}
}

// TestGetQuotesTheRunPrice: image.get asks what a run is charged (Deps'
// RunPrice, of the image's digest) only in a run's order.
func TestGetQuotesTheRunPrice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveImages(t)
	storetest.Member(t, s.pool, "p-1", "u-1", api.ProjectMember, t0)
	img, err := images.Publish(ctx, s.pool, images.New{Name: "tiny", ProjectID: "p-1", Repository: "r/tiny", Digest: digestA, By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	get := s.Find(t, api.EndpointImageGet)
	ann := caller("u-1", api.RoleUser)
	out, err := endpointtest.Read[api.Image](ctx, get, ann, api.ImageRef{Image: "tiny", Project: "research"})
	if err != nil || out.ID != img.ID || out.RunPrice != nil || len(s.priced) != 0 {
		t.Fatalf("get: %+v, %v (priced %v); want the image, unpriced", out, err, s.priced)
	}
	out, err = endpointtest.Read[api.Image](ctx, get, ann, api.ImageRef{Image: "tiny", Project: "research", RunOrder: true})
	if err != nil || out.RunPrice == nil || out.RunPrice.PricePerHourMinor != 1 || len(s.priced) != 1 || s.priced[0] != digestA {
		t.Fatalf("get in run order: %+v, %v (priced %v); want the price of %s", out, err, s.priced, digestA)
	}
	// Not a member of p-2: as if it did not exist.
	if _, err := endpointtest.Read[api.Image](ctx, get, ann, api.ImageRef{Image: "tiny", Project: "other"}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("get in a project not one's own: got %v; want not_found", err)
	}
}

// TestVerifyEndpointQueues: image.verify queues one verification, and
// audits whether this ask queued it or found one pending.
func TestVerifyEndpointQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveImages(t)
	storetest.Member(t, s.pool, "p-1", "u-1", api.ProjectMember, t0)
	img, err := images.Publish(ctx, s.pool, images.New{Name: "tiny", ProjectID: "p-1", Repository: "r/tiny", Digest: digestA, By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	verify := s.Find(t, api.EndpointImageVerify)
	for i, queued := range []string{"true", "false"} {
		out, err := endpointtest.Mutate[api.Image](ctx, s.Run, verify, caller("u-1", api.RoleUser), api.ImageChangeRequest{Image: img.ID})
		if err != nil || out.Verification == nil {
			t.Fatalf("verify %d: %+v, %v; want a pending verification", i, out, err)
		}
		if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND detail->>'queued' = $2`,
			api.EndpointImageVerify, queued); n != 1 {
			t.Errorf("verify %d: audit rows with queued=%s: %d; want 1", i, queued, n)
		}
	}
}
