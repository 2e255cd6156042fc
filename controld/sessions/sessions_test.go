package sessions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// TestStartRefusals: what the gateway may not store is invalid_argument,
// a user or allocation that does not exist is not_found; none of them
// writes a row.
func TestStartRefusals(t *testing.T) {
	w := newWorld(t)
	ok := gateproto.SessionStartRequest{UserID: w.alice, AllocationID: w.aliceAlloc, Kind: api.SessionShell, Gateway: "gw-1"}
	for _, tc := range []struct {
		name string
		edit func(r *gateproto.SessionStartRequest)
		want api.Code
	}{
		{"no user", func(r *gateproto.SessionStartRequest) { r.UserID = "" }, api.CodeInvalidArgument},
		{"no allocation", func(r *gateproto.SessionStartRequest) { r.AllocationID = "" }, api.CodeInvalidArgument},
		{"unknown kind", func(r *gateproto.SessionStartRequest) { r.Kind = "telnet" }, api.CodeInvalidArgument},
		{"command too long", func(r *gateproto.SessionStartRequest) { r.Command = strings.Repeat("x", sessions.MaxCommand+1) }, api.CodeInvalidArgument},
		{"command not UTF-8", func(r *gateproto.SessionStartRequest) { r.Command = "ls \xff" }, api.CodeInvalidArgument},
		{"recording too long", func(r *gateproto.SessionStartRequest) { r.Recording = strings.Repeat("r", sessions.MaxRecording+1) }, api.CodeInvalidArgument},
		{"gateway too long", func(r *gateproto.SessionStartRequest) { r.Gateway = strings.Repeat("g", sessions.MaxGateway+1) }, api.CodeInvalidArgument},
		{"unknown user", func(r *gateproto.SessionStartRequest) { r.UserID = ids.New(ids.User) }, api.CodeNotFound},
		{"unknown allocation", func(r *gateproto.SessionStartRequest) { r.AllocationID = ids.New(ids.Allocation) }, api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			_, err := sessions.Start(context.Background(), w.pool, r, t0)
			endpointtest.WantCode(t, tc.name, err, tc.want)
			if n := w.count(t); n != 0 {
				t.Errorf("sessions after a refused start: got %d; want 0", n)
			}
		})
	}
	// At the limits is fine.
	r := ok
	r.Command, r.Recording = strings.Repeat("x", sessions.MaxCommand), strings.Repeat("r", sessions.MaxRecording)
	if _, err := sessions.Start(context.Background(), w.pool, r, t0); err != nil {
		t.Errorf("start at the limits: %v", err)
	}
}

// TestEndOnce: ending a running session records how it ended; ending it
// again (a gateway repeating itself) changes nothing; an empty recording
// keeps the one given at start; an unknown id is not_found.
func TestEndOnce(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	s, err := sessions.Start(ctx, w.pool, gateproto.SessionStartRequest{UserID: w.alice, AllocationID: w.aliceAlloc,
		Kind: api.SessionShell, Recording: "rec-1", Gateway: "gw-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != api.SessionRunning || !strings.HasPrefix(s.ID, sessions.IDPrefix+"-") {
		t.Fatalf("started session: got state %s id %s; want running, ts-…", s.State, s.ID)
	}
	code := 3
	t1 := t0.Add(time.Minute)
	ended, err := sessions.End(ctx, w.pool, gateproto.SessionEndRequest{ID: s.ID, Bytes: 42, ExitStatus: &code}, t1)
	if err != nil {
		t.Fatal(err)
	}
	if ended.State != api.SessionEnded || ended.Bytes != 42 || ended.ExitStatus == nil || *ended.ExitStatus != 3 ||
		ended.EndedAt == nil || !ended.EndedAt.Equal(t1) || ended.Recording != "rec-1" {
		t.Errorf("ended: got %+v; want ended at %v, 42 bytes, exit 3, recording rec-1", ended, t1)
	}
	again, err := sessions.End(ctx, w.pool, gateproto.SessionEndRequest{ID: s.ID, Bytes: 99, Recording: "rec-2", Interrupted: true},
		t1.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.State != api.SessionEnded || again.Bytes != 42 || !again.EndedAt.Equal(t1) || again.Recording != "rec-1" {
		t.Errorf("ended again: got %+v; want the first end unchanged", again)
	}
	_, err = sessions.End(ctx, w.pool, gateproto.SessionEndRequest{ID: "ts-nope"}, t1)
	endpointtest.WantCode(t, "end an unknown session", err, api.CodeNotFound)
	_, err = sessions.End(ctx, w.pool, gateproto.SessionEndRequest{ID: s.ID, Bytes: -1}, t1)
	endpointtest.WantCode(t, "negative bytes", err, api.CodeInvalidArgument)
}

// TestInterruptOnlyThatGatewaysRunning: a gateway starting up marks its
// own running sessions interrupted, and nobody else's, nor ended ones.
func TestInterruptOnlyThatGatewaysRunning(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	start := func(gw string) api.TerminalSession {
		s, err := sessions.Start(ctx, w.pool, gateproto.SessionStartRequest{UserID: w.alice, AllocationID: w.aliceAlloc,
			Kind: api.SessionExec, Command: "true", Gateway: gw}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	running, done, other := start("gw-1"), start("gw-1"), start("gw-2")
	if _, err := sessions.End(ctx, w.pool, gateproto.SessionEndRequest{ID: done.ID}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Hour)
	got, err := sessions.Interrupt(ctx, w.pool, "gw-1", t1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != running.ID || got[0].State != api.SessionInterrupted || !got[0].EndedAt.Equal(t1) {
		t.Fatalf("interrupted: got %+v; want only %s, interrupted at %v", got, running.ID, t1)
	}
	v := sessions.Viewer{Operator: true}
	for id, want := range map[string]string{done.ID: api.SessionEnded, other.ID: api.SessionRunning} {
		s, err := sessions.Get(ctx, w.pool, v, id)
		if err != nil || s.State != want {
			t.Errorf("session %s after another's interrupt: got %s, %v; want %s", id, s.State, err, want)
		}
	}
	_, err = sessions.Interrupt(ctx, w.pool, "", t1)
	endpointtest.WantCode(t, "interrupt without a gateway", err, api.CodeInvalidArgument)
}

// TestViewersSeeTheirOwn: a user gets and lists only their own sessions
// (another's is not_found, not forbidden); an operator sees all.
func TestViewersSeeTheirOwn(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	mine, err := sessions.Start(ctx, w.pool, gateproto.SessionStartRequest{UserID: w.alice, AllocationID: w.aliceAlloc, Kind: api.SessionShell}, t0)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := sessions.Start(ctx, w.pool, gateproto.SessionStartRequest{UserID: w.bob, AllocationID: w.bobAlloc, Kind: api.SessionShell},
		t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	alice := sessions.Viewer{UserID: w.alice}
	if _, err := sessions.Get(ctx, w.pool, alice, mine.ID); err != nil {
		t.Errorf("own session: %v", err)
	}
	_, err = sessions.Get(ctx, w.pool, alice, theirs.ID)
	endpointtest.WantCode(t, "another user's session", err, api.CodeNotFound)
	list := func(v sessions.Viewer, allocID string) []string {
		got, err := sessions.List(ctx, w.pool, v, api.SessionListRequest{AllocationID: allocID})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(got))
		for i, s := range got {
			out[i] = s.ID
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		v     sessions.Viewer
		alloc string
		want  []string
	}{
		{"user", alice, "", []string{mine.ID}},
		{"user, another's allocation", alice, w.bobAlloc, []string{}},
		{"operator, newest first", sessions.Viewer{Operator: true}, "", []string{theirs.ID, mine.ID}},
		{"operator, one allocation", sessions.Viewer{Operator: true}, w.aliceAlloc, []string{mine.ID}},
	} {
		if got := list(tc.v, tc.alloc); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %v; want %v", tc.name, got, tc.want)
		}
	}
}
