package sessions_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// served is a world with sessions' endpoints over it and a recordings
// stream on a real JetStream.
type served struct {
	*world
	js jetstream.JetStream
	endpointtest.Harness
}

func serve(t *testing.T) *served {
	t.Helper()
	w := newWorld(t)
	js, err := jetstream.New(testutil.NATS(t).Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(t.Context(), recstore.StreamConfig(1, 64<<20, time.Hour)); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return t0 }
	return &served{world: w, js: js, Harness: endpointtest.Serve(w.pool, clock,
		sessions.Endpoints(sessions.Deps{DB: w.pool, JS: js, Now: clock}))}
}

var gateway = &endpoint.Request{Principal: &identity.Principal{UserID: "u-gw", Email: "gw-a@gateway.test", Role: api.RoleGateway},
	Log: slog.New(slog.DiscardHandler)}

func user(id string) *endpoint.Request {
	return endpointtest.User(id, "")
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, s.pool, sql, args...)
}

func (s *served) start(t *testing.T) api.TerminalSession {
	t.Helper()
	ts, err := endpointtest.Mutate[api.TerminalSession](context.Background(), s.Run, s.Find(t, gateproto.EndpointSessionStart),
		gateway, gateproto.SessionStartRequest{UserID: s.alice, AllocationID: s.aliceAlloc, Kind: api.SessionShell})
	if err != nil {
		t.Fatal(err)
	}
	return *ts
}

func (s *served) end(t *testing.T, req gateproto.SessionEndRequest) (*api.TerminalSession, error) {
	t.Helper()
	return endpointtest.Mutate[api.TerminalSession](context.Background(), s.Run, s.Find(t, gateproto.EndpointSessionEnd),
		gateway, req)
}

// TestStartNamesTheCallingGateway: a start that names no gateway is the
// calling gateway's (its principal's email), audited and told to the
// session's user alone.
func TestStartNamesTheCallingGateway(t *testing.T) {
	s := serve(t)
	ts := s.start(t)
	if ts.Gateway != "gw-a@gateway.test" || ts.State != api.SessionRunning {
		t.Errorf("started: got gateway %q, state %s; want gw-a@gateway.test, running", ts.Gateway, ts.State)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'session.start' AND target_id = $1
		AND detail->>'user_id' = $2`, ts.ID, s.alice); n != 1 {
		t.Errorf("audit rows of the start: got %d; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = 'session.start' AND users = ARRAY[$1]::text[]`, s.alice); n != 1 {
		t.Errorf("start events to alice alone: got %d; want 1", n)
	}
}

// TestEndSealsTheRecording: a recording named other than its session is
// invalid_argument and leaves the session running; one the store cannot
// seal (its chunks are not there) is left out and the session still
// ends; one that is whole is sealed, kept on the session, and read back
// through session.recording by its user alone.
func TestEndSealsTheRecording(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	ts := s.start(t)
	_, err := s.end(t, gateproto.SessionEndRequest{ID: ts.ID, Recording: "ts-other", RecordingChunks: 1})
	endpointtest.WantCode(t, "recording of another name", err, api.CodeInvalidArgument)
	if got, err := sessions.Get(ctx, s.pool, sessions.Viewer{Operator: true}, ts.ID); err != nil || got.State != api.SessionRunning {
		t.Fatalf("after a refused end: got %+v, %v; want it running", got, err)
	}
	ended, err := s.end(t, gateproto.SessionEndRequest{ID: ts.ID, Recording: ts.ID, RecordingChunks: 2})
	if err != nil || ended.State != api.SessionEnded || ended.Recording != "" {
		t.Fatalf("end with chunks missing: got %+v, %v; want ended without a recording", ended, err)
	}

	rec := s.start(t)
	data := make([]byte, recstore.ChunkSize+1000)
	_, _ = rand.Read(data)
	n, err := recstore.Put(ctx, s.js, rec.ID, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	ended, err = s.end(t, gateproto.SessionEndRequest{ID: rec.ID, Recording: rec.ID, RecordingChunks: n})
	if err != nil || ended.Recording != rec.ID {
		t.Fatalf("end with a whole recording: got %+v, %v; want recording %s", ended, err, rec.ID)
	}
	read := s.Find(t, api.EndpointSessionRecording)
	var got []byte
	for off := int64(0); ; {
		chunk, err := endpointtest.Read[api.RecordingChunk](ctx, read, user(s.alice), api.RecordingRequest{ID: rec.ID, Offset: off, Limit: 100_000})
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		got = append(got, chunk.Data...)
		off += int64(len(chunk.Data))
		if chunk.EOF || len(chunk.Data) == 0 {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Errorf("recording read back: got %d bytes; want the %d written", len(got), len(data))
	}
	for _, tc := range []struct {
		name string
		r    *endpoint.Request
		req  api.RecordingRequest
		want api.Code
	}{
		{"negative offset", user(s.alice), api.RecordingRequest{ID: rec.ID, Offset: -1}, api.CodeInvalidArgument},
		{"past the end", user(s.alice), api.RecordingRequest{ID: rec.ID, Offset: int64(len(data)) + 1}, api.CodeInvalidArgument},
		{"another user's", user(s.bob), api.RecordingRequest{ID: rec.ID}, api.CodeNotFound},
		{"no recording", user(s.alice), api.RecordingRequest{ID: ts.ID}, api.CodeNotFound},
	} {
		_, err := endpointtest.Read[api.RecordingChunk](ctx, read, tc.r, tc.req)
		endpointtest.WantCode(t, tc.name, err, tc.want)
	}
}

// TestInterruptEndpoint: a gateway's restart interrupts its running
// sessions with one audit row and one event naming them, told to no
// user; with none running the answer is an empty list, not null.
func TestInterruptEndpoint(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	a, b := s.start(t), s.start(t)
	interrupt := s.Find(t, gateproto.EndpointSessionInterrupt)
	resp, err := endpointtest.Mutate[gateproto.SessionInterruptResponse](ctx, s.Run, interrupt, gateway,
		gateproto.SessionInterruptRequest{Gateway: "gw-a@gateway.test"})
	if err != nil || len(resp.Sessions) != 2 {
		t.Fatalf("interrupt: got %+v, %v; want both sessions", resp, err)
	}
	var detail []byte
	if err := s.pool.QueryRow(ctx, `SELECT detail FROM audit_logs WHERE action = 'session.interrupt' AND target_type = 'gateway'
		AND target_id = 'gw-a@gateway.test'`).Scan(&detail); err != nil {
		t.Fatalf("audit row of the interrupt: %v", err)
	}
	var d struct{ Sessions []string }
	if err := json.Unmarshal(detail, &d); err != nil || len(d.Sessions) != 2 ||
		!(d.Sessions[0] == a.ID || d.Sessions[1] == a.ID) || !(d.Sessions[0] == b.ID || d.Sessions[1] == b.ID) {
		t.Errorf("audit detail: got %s; want sessions %s and %s", detail, a.ID, b.ID)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = 'session.interrupt' AND users = '{}'`); n != 1 {
		t.Errorf("interrupt events told to no user: got %d; want 1", n)
	}
	out, err := interrupt.Prepare(ctx, gateway, endpointtest.Body(gateproto.SessionInterruptRequest{Gateway: "gw-a@gateway.test"}))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.Run.Run(ctx, mutate.Request{Endpoint: gateproto.EndpointSessionInterrupt, ActorID: "u-gw", Key: "again"}, out)
	if err != nil || !bytes.Contains(raw, []byte(`"sessions":[]`)) {
		t.Errorf("interrupt with none running: got %s, %v; want an empty list", raw, err)
	}
}
