package images_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("images")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	storetest.User(t, pool, "u-1", "ann@example.test", t0)
	storetest.Project(t, pool, "p-1", "research", "u-1", t0)
	storetest.Project(t, pool, "p-2", "other", "u-1", t0)
	return pool
}

func TestPublishFindList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	plat, err := images.Publish(ctx, pool, images.New{Name: "tiny", Repository: "127.0.0.1:5000/tiny", Digest: digestA,
		Source: "127.0.0.1:5000/tiny:v1", By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if plat.Scope != api.ImageScopePlatform || plat.Lifecycle != api.ImagePublished || plat.Trust != api.TrustUnverified ||
		plat.Ref != "127.0.0.1:5000/tiny@"+digestA || !strings.HasPrefix(plat.ID, "img-") {
		t.Fatalf("published: %+v", plat)
	}
	// The same name in a project is another image; again on the platform is refused.
	own, err := images.Publish(ctx, pool, images.New{Name: "tiny", ProjectID: "p-1", Repository: "r/tiny", Digest: digestA, By: "u-1"}, t0)
	if err != nil || own.Scope != api.ImageScopeProject || own.Project != "research" {
		t.Fatalf("project image: %+v, %v", own, err)
	}
	if _, err := images.Publish(ctx, pool, images.New{Name: "tiny", Repository: "r/x", Digest: digestA, By: "u-1"}, t0); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("same platform name: got %v; want conflict", err)
	}
	if _, err := images.Publish(ctx, pool, images.New{Name: "Bad Name", Repository: "r/x", Digest: digestA, By: "u-1"}, t0); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("bad name: got %v; want invalid_argument", err)
	}
	// By name: the project's own first, then the platform's.
	if got, err := images.Find(ctx, pool, "tiny", "p-1", false); err != nil || got.ID != own.ID {
		t.Fatalf("find in p-1: got %+v, %v; want the project's", got, err)
	}
	if got, err := images.Find(ctx, pool, "tiny", "p-2", false); err != nil || got.ID != plat.ID {
		t.Fatalf("find in p-2: got %+v, %v; want the platform's", got, err)
	}
	if _, err := images.Find(ctx, pool, "ghost", "p-1", false); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("find ghost: got %v; want not_found", err)
	}
	// A user lists the project's own, not the unpromoted platform image.
	if got, _ := images.List(ctx, pool, "p-1", false); len(got) != 1 || got[0].ID != own.ID {
		t.Fatalf("list for p-1: %+v", got)
	}
	if got, _ := images.List(ctx, pool, "", true); len(got) != 2 {
		t.Fatalf("list all: got %d; want 2", len(got))
	}
	// Verified and promoted, the platform image is listed for everyone.
	if _, err := images.RecordCheck(ctx, pool, plat.ID, images.Check{OK: true, Platform: api.ImagePlatform, SizeBytes: 42, Layers: 1}, t0); err != nil {
		t.Fatal(err)
	}
	moved, err := images.Apply(ctx, pool, plat.ID, images.Move{Lifecycle: api.ImagePromoted, Trust: api.TrustVerified}, "", t0)
	if err != nil || moved.Lifecycle != api.ImagePromoted || moved.SizeBytes != 42 || moved.VerifiedAt == nil {
		t.Fatalf("promoted: %+v, %v", moved, err)
	}
	if got, _ := images.List(ctx, pool, "p-2", false); len(got) != 1 || got[0].ID != plat.ID {
		t.Fatalf("list for p-2: %+v", got)
	}
	// A failed check keeps the lifecycle and records the reason; it hides the image.
	failed, err := images.RecordCheck(ctx, pool, plat.ID, images.Check{Reason: "layer 1: digest mismatch"}, t0)
	if err != nil || failed.Lifecycle != api.ImagePromoted || failed.Trust != api.TrustFailedVerification ||
		failed.TrustReason != "layer 1: digest mismatch" {
		t.Fatalf("failed: %+v, %v", failed, err)
	}
	if got, _ := images.List(ctx, pool, "p-2", false); len(got) != 0 {
		t.Fatalf("list after a failed check: %+v; want none", got)
	}
}
