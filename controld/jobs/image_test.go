package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// image publishes an image named name (of project, "" for the
// platform's) and moves it to lifecycle and trust.
func (w *world) image(t *testing.T, name, project, lifecycle, trust string) api.Image {
	t.Helper()
	ctx := context.Background()
	digest := "sha256:" + strings.Repeat(string("0123456789abcdef"[len(name)%16]), 63) + string("0123456789abcdef"[len(project)%16])
	img, err := images.Publish(ctx, w.pool, images.New{Name: name, ProjectID: project, Repository: "127.0.0.1:5000/x/" + name,
		Digest: digest, By: w.bob.UserID}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = images.Apply(ctx, w.pool, img.ID, images.Move{Lifecycle: lifecycle, Trust: trust}, "test", t0); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestCreateWithImage: a job naming a verified, promoted image (by name,
// or by its digest reference) is started with the image's digest
// reference and the allocation's GPUs; job get shows it.
func TestCreateWithImage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	img := w.image(t, "tiny", "", api.ImagePromoted, api.TrustVerified)
	for _, ref := range []string{"tiny", img.Ref} {
		alloc := w.allocation(t, api.AllocActive)
		j, err := w.create(t, api.JobCreateRequest{AllocationID: alloc, Run: "cat /etc/os-release", Image: ref})
		if err != nil {
			t.Fatalf("image %s: %v", ref, err)
		}
		if j.Image != "tiny" || j.ImageRef != img.Ref {
			t.Errorf("image %s: job shows image %q %q; want tiny %s", ref, j.Image, j.ImageRef, img.Ref)
		}
		taskID, _ := w.currentTask(t, j.ID)
		var raw []byte
		if err := w.pool.QueryRow(context.Background(), `SELECT params FROM node_tasks WHERE id = $1`, taskID).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var p hostproto.JobStartParams
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.Image != img.Ref {
			t.Errorf("image %s: job.start names %q; want %s", ref, p.Image, img.Ref)
		}
	}
}

// TestCreateRefusesImages: an unknown image, another project's, a revoked,
// unverified or unpromoted one, or an image on a slice, is refused
// naming the field image, and nothing is written.
func TestCreateRefusesImages(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	other := ids.New(ids.Project)
	w.image(t, "revoked", "", api.ImagePromoted, api.TrustRevoked)
	w.image(t, "unverified", "", api.ImagePromoted, api.TrustUnverified)
	w.image(t, "published", "", api.ImagePublished, api.TrustVerified)
	theirs := w.otherProjectImage(t, other, "theirs")
	w.image(t, "ok", "", api.ImagePromoted, api.TrustVerified)
	slice := w.sliceAllocation(t)
	tests := []struct {
		name, alloc, image, text string
	}{
		{"unknown", w.allocID, "nope", "no image"},
		{"unknown digest", w.allocID, "127.0.0.1:5000/x/nope@sha256:" + strings.Repeat("e", 64), "no image"},
		{"another project's", w.allocID, theirs.ID, "no image"},
		{"another project's digest", w.allocID, theirs.Ref, "no image"},
		{"revoked", w.allocID, "revoked", "revoked"},
		{"unverified", w.allocID, "unverified", "not verified"},
		{"not promoted", w.allocID, "published", "not promoted"},
		{"a slice", slice, "ok", "bare-metal"},
	}
	for _, tt := range tests {
		_, err := w.create(t, api.JobCreateRequest{AllocationID: tt.alloc, Run: "true", Image: tt.image})
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.HasPrefix(message(err), "image: ") || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: got %v; want invalid argument, field image, naming %q", tt.name, err, tt.text)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM jobs`) + w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Errorf("%d jobs and tasks written; want none", n)
	}
}

func message(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}

// otherProjectImage is a verified, promoted image of another project.
func (w *world) otherProjectImage(t *testing.T, project, name string) api.Image {
	t.Helper()
	storetest.Project(t, w.pool, project, "other", w.alice.UserID, t0)
	return w.image(t, name, project, api.ImagePromoted, api.TrustVerified)
}

// sliceAllocation is an active slice allocation of bob's project.
func (w *world) sliceAllocation(t *testing.T) string {
	t.Helper()
	a := storetest.Allocation(t, w.pool, api.Allocation{ProjectID: w.project, UserID: w.bob.UserID, SKU: "h100-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, State: api.AllocActive})
	if _, err := w.pool.Exec(context.Background(), `UPDATE allocations SET node_id = 'n-1' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	return a.ID
}
