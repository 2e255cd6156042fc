package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/internal/api"
)

// imageMoves are the changes after which no new job runs an image, with
// the words job.create's refusal has for each.
var imageMoves = []struct {
	name, lifecycle, trust, text string
}{
	{"revoked", api.ImagePromoted, api.TrustRevoked, "is revoked: no new job runs it"},
	{"failed verification", api.ImagePromoted, api.TrustFailedVerification, "is failed_verification, not verified: a job runs only verified images"},
	{"retired", api.ImageRetired, api.TrustVerified, "is retired, not promoted: a job runs only promoted images"},
}

func (w *world) moveImage(t *testing.T, img api.Image, lifecycle, trust string) {
	t.Helper()
	if _, err := images.Apply(context.Background(), w.pool, img.ID, images.Move{Lifecycle: lifecycle, Trust: trust}, "test", t0); err != nil {
		t.Fatal(err)
	}
}

// TestQueuedJobRefusedWhenItsImageChanged: a job queued on an allocation
// in line with a runnable image whose image is revoked, fails
// verification or is retired before the allocation is active is not
// started: it fails with job.create's refusal as its reason, no
// job.start is queued, and its allocation is released (release:
// on-exit). The image still runnable starts as before.
func TestQueuedJobRefusedWhenItsImageChanged(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tt := range imageMoves {
		img := w.image(t, "q-"+strings.ReplaceAll(tt.name, " ", "-"), "", api.ImagePromoted, api.TrustVerified)
		allocID := w.queuedAlloc(t)
		j, err := w.create(t, api.JobCreateRequest{AllocationID: allocID, Run: "true", Queue: true, Image: img.Name})
		if err != nil || j.State != api.JobQueued {
			t.Fatalf("%s: created %+v, %v; want queued", tt.name, j, err)
		}
		w.moveImage(t, img, tt.lifecycle, tt.trust)
		w.setAlloc(t, allocID, api.AllocActive, "")
		w.advance(t, allocID)
		got := w.job(t, j.ID)
		want := "the job could not be started: image: " + img.Name + " (" + img.ID + ") " + tt.text
		if got.State != api.JobFailed || got.Reason != want || got.EndedAt == nil {
			t.Errorf("%s: job %s %q; want failed %q", tt.name, got.State, got.Reason, want)
		}
		if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE params->>'job_id' = $1`, j.ID); n != 0 {
			t.Errorf("%s: %d node tasks; want none", tt.name, n)
		}
		if s := w.allocState(t, allocID); s != api.AllocReleasing {
			t.Errorf("%s: allocation %s; want releasing", tt.name, s)
		}
	}
	img := w.image(t, "still-ok", "", api.ImagePromoted, api.TrustVerified)
	allocID := w.queuedAlloc(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: allocID, Run: "true", Queue: true, Image: img.Name})
	if err != nil {
		t.Fatal(err)
	}
	w.setAlloc(t, allocID, api.AllocActive, "")
	w.advance(t, allocID)
	if got := w.job(t, j.ID); got.State != api.JobStarting {
		t.Errorf("runnable image: job %s %q; want starting", got.State, got.Reason)
	}
}

// TestRetryRefusedWhenItsImageChanged: a lost job with retries left whose
// image was revoked, failed verification or was retired since it was
// created is not started again: it fails (not lost) with the lost reason
// and job.create's refusal, one job.start in all, and its allocation is
// released.
func TestRetryRefusedWhenItsImageChanged(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tt := range imageMoves {
		img := w.image(t, "r-"+strings.ReplaceAll(tt.name, " ", "-"), "", api.ImagePromoted, api.TrustVerified)
		allocID := w.allocation(t, api.AllocActive)
		j, err := w.create(t, api.JobCreateRequest{AllocationID: allocID, Run: "train", Retries: 1, Image: img.Name})
		if err != nil {
			t.Fatal(err)
		}
		w.moveImage(t, img, tt.lifecycle, tt.trust)
		task, typ := w.currentTask(t, j.ID)
		w.settle(t, task, typ, interrupted)
		got := w.job(t, j.ID)
		refusal := "; not retried: image: " + img.Name + " (" + img.ID + ") " + tt.text
		if got.State != api.JobFailed || !strings.HasPrefix(got.Reason, "hostd stopped") || !strings.HasSuffix(got.Reason, refusal) ||
			got.ExitCode != nil || got.Attempt != 1 {
			t.Errorf("%s: job %+v; want failed at attempt 1, no exit code, reason ending %q", tt.name, got, refusal)
		}
		if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'job_id' = $2`, api.TaskJobStart, j.ID); n != 1 {
			t.Errorf("%s: %d job.start tasks; want 1", tt.name, n)
		}
		if s := w.allocState(t, allocID); s != api.AllocReleasing {
			t.Errorf("%s: allocation %s; want releasing", tt.name, s)
		}
	}
}
