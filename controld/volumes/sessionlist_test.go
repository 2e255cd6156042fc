package volumes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// TestVolumeSessionsAreListed: each sftp session to a volume is a row of
// the session index (`gpuaas session list`), naming the volume, its user
// and when: a retry of the same session is the same row; gate.volume_end
// ends it; a hold the node reported gone, one taken over after its lease
// and one on a volume the node lost end interrupted. Others do not see
// it.
func TestVolumeSessionsAreListed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100*gib)
	ctx := context.Background()
	t0 := f.now.Add(time.Minute).Truncate(time.Microsecond)
	v, err := f.create(t, "data", gib, "bm-1")
	if err != nil {
		t.Fatal(err)
	}
	f.settleAt(t, v, api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: gib}, t0)
	open := func(key string, at time.Time) {
		t.Helper()
		if err := f.in(t, func(tx pgx.Tx) error {
			_, _, err := volumes.OpenSession(ctx, tx, v.ID, f.user, key, at)
			return err
		}); err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
	}
	list := func(viewer sessions.Viewer) []api.TerminalSession {
		t.Helper()
		got, err := sessions.List(ctx, f.pool, viewer, api.SessionListRequest{VolumeID: v.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	me := sessions.Viewer{UserID: f.user}
	want := func(step string, states ...string) []api.TerminalSession {
		t.Helper()
		got := list(me)
		if len(got) != len(states) {
			t.Fatalf("%s: %d sessions %+v; want %v", step, len(got), got, states)
		}
		for i, s := range got { // newest first
			if s.State != states[i] || s.VolumeID != v.ID || s.AllocationID != "" || s.UserID != f.user || s.Kind != api.SessionSFTP {
				t.Errorf("%s: session %d %+v; want %s, sftp to %s by %s", step, i, s, states[i], v.ID, f.user)
			}
		}
		return got
	}

	t1 := t0.Add(time.Minute)
	open("SHA256:a", t1)
	open("SHA256:a", t1.Add(time.Second)) // the gateway retried: the same session
	got := want("open", api.SessionRunning)
	if !got[0].StartedAt.Equal(t1) || got[0].EndedAt != nil {
		t.Errorf("running session %+v; want started at %s", got[0], t1)
	}
	if s, err := sessions.Get(ctx, f.pool, me, got[0].ID); err != nil || s.VolumeID != v.ID {
		t.Errorf("session.get: %+v, %v", s, err)
	}
	stranger := sessions.Viewer{UserID: ids.New(ids.User)}
	if _, err := sessions.Get(ctx, f.pool, stranger, got[0].ID); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("a stranger's session.get: %v; want not_found", err)
	}
	if others := list(stranger); len(others) != 0 {
		t.Errorf("a stranger lists %+v", others)
	}

	t2 := t1.Add(10 * time.Minute)
	if err := f.in(t, func(tx pgx.Tx) error {
		_, _, released, err := volumes.EndSession(ctx, tx, v.ID, "SHA256:a", t2)
		if !released {
			t.Error("not released")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := want("ended", api.SessionEnded); got[0].EndedAt == nil || !got[0].EndedAt.Equal(t2) {
		t.Errorf("ended session %+v; want ended at %s", got[0], t2)
	}

	// The node reports no such session: interrupted.
	t3 := t2.Add(time.Minute)
	open("SHA256:b", t3)
	if err := f.in(t, func(tx pgx.Tx) error {
		lost, err := volumes.EndLostSessions(ctx, tx, f.node.ID, json.RawMessage(`{"volume_sessions":[]}`), t3.Add(time.Hour))
		if len(lost) != 1 {
			t.Errorf("ended %d lost sessions; want 1", len(lost))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want("node report", api.SessionInterrupted, api.SessionEnded)

	// A hold past its lease is taken over by a new session: the old row
	// is interrupted, the new one runs.
	t4 := t3.Add(2 * time.Hour)
	open("SHA256:c", t4)
	open("SHA256:d", t4.Add(api.VolumeSessionMax+volumes.SessionMargin+time.Minute))
	want("taken over", api.SessionRunning, api.SessionInterrupted, api.SessionInterrupted, api.SessionEnded)
}
