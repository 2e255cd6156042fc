package controld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// sessionsEndpoints are terminal sessions through the gateway and their
// recordings (controld/sessions).
func (s *Server) sessionsEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, gateproto.OpSessionStart, s.sessionStart),
		mutation(s, gateproto.OpSessionEnd, s.sessionEnd),
		mutation(s, gateproto.OpSessionInterrupt, s.sessionInterrupt),
		query(s, api.OpSessionList, s.sessionList),
		query(s, api.OpSessionGet, s.sessionGet),
		query(s, api.OpSessionRecording, s.sessionRecording),
	}
}

func (s *Server) sessionStart(_ context.Context, c *call, req gateproto.SessionStartRequest) (work[api.TerminalSession], error) {
	if strings.TrimSpace(req.Gateway) == "" {
		req.Gateway = c.principal.Email
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TerminalSession, mutate.Effect, error) {
		ts, err := sessions.Start(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &ts, sessionEffect("session.start", ts), nil
	}, nil
}

func (s *Server) sessionEnd(ctx context.Context, c *call, req gateproto.SessionEndRequest) (work[api.TerminalSession], error) {
	if err := s.sealRecording(ctx, c, &req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TerminalSession, mutate.Effect, error) {
		ts, err := sessions.End(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &ts, sessionEffect("session.end", ts), nil
	}, nil
}

func (s *Server) sessionInterrupt(_ context.Context, c *call, req gateproto.SessionInterruptRequest) (work[gateproto.SessionInterruptResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*gateproto.SessionInterruptResponse, mutate.Effect, error) {
		list, err := sessions.Interrupt(ctx, tx, req.Gateway, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if list == nil {
			list = []api.TerminalSession{}
		}
		ids := make([]string, len(list))
		for i, ts := range list {
			ids[i] = ts.ID
		}
		// One event, told to no user: it names sessions of many users.
		detail := map[string]any{"gateway": req.Gateway, "sessions": ids}
		eff := mutate.Effect{
			Audit:  audit.Entry{Action: "session.interrupt", TargetType: "gateway", TargetID: req.Gateway, Detail: detail},
			Events: []outbox.Event{{Kind: "session.interrupt", Subject: req.Gateway, Payload: detail}},
		}
		return &gateproto.SessionInterruptResponse{Sessions: list}, eff, nil
	}, nil
}

// sessionEffect audits a session change and tells the session's user.
func sessionEffect(kind string, ts api.TerminalSession) mutate.Effect {
	return mutate.Effect{
		Audit: audit.Entry{Action: kind, TargetType: "terminal_session", TargetID: ts.ID,
			Detail: map[string]any{"user_id": ts.UserID, "allocation_id": ts.AllocationID, "kind": ts.Kind}},
		Events: []outbox.Event{{Kind: kind, Subject: ts.ID, Users: []string{ts.UserID}, Payload: ts}},
	}
}

func (s *Server) viewer(c *call) sessions.Viewer {
	return sessions.Viewer{UserID: c.principal.UserID, Operator: c.principal.IsOperator()}
}

func (s *Server) sessionList(ctx context.Context, c *call, req api.SessionListRequest) (*api.SessionListResponse, error) {
	list, err := sessions.List(ctx, s.pool, s.viewer(c), req)
	if err != nil {
		return nil, err
	}
	return &api.SessionListResponse{Sessions: list}, nil
}

func (s *Server) sessionGet(ctx context.Context, c *call, req api.SessionRef) (*api.TerminalSession, error) {
	return pointer(sessions.Get(ctx, s.pool, s.viewer(c), req.ID))
}

// sealRecording seals the recording the gateway wrote of the session
// (internal/recstore): a recording is named after its session, and only
// chunks that are there and whole are sealed. A recording that cannot be
// sealed is logged and left out: the session is still closed.
func (s *Server) sealRecording(ctx context.Context, c *call, req *gateproto.SessionEndRequest) error {
	if req.Recording == "" {
		return nil
	}
	if req.Recording != req.ID {
		return api.Errorf(api.CodeInvalidArgument, "a session's recording is named after it: %q is not %q", req.Recording, req.ID)
	}
	if req.RecordingChunks == 0 {
		return nil // an older gateway's, in the object store bucket
	}
	if _, err := recstore.Seal(ctx, s.js, req.Recording, req.RecordingChunks, s.now()); err != nil {
		c.log.Error("seal recording; the session ends without it", "session", req.ID, "err", err)
		req.Recording, req.RecordingChunks = "", 0
	}
	return nil
}

// sessionRecording serves a chunk of a recording to whoever may see the
// session (sessions.Get decides): users never touch JetStream themselves.
func (s *Server) sessionRecording(ctx context.Context, c *call, req api.RecordingRequest) (*api.RecordingChunk, error) {
	if req.Offset < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "offset must not be negative")
	}
	if req.Limit <= 0 || req.Limit > api.RecordingChunkMax {
		req.Limit = api.RecordingChunkMax
	}
	sess, err := sessions.Get(ctx, s.pool, s.viewer(c), req.ID)
	if err != nil {
		return nil, err
	}
	if sess.Recording == "" {
		return nil, api.Errorf(api.CodeNotFound, "session %s has no recording: only sessions with a terminal are recorded", req.ID)
	}
	meta, err := recstore.Open(ctx, s.js, sess.Recording)
	if errors.Is(err, recstore.ErrNotFound) {
		return s.legacyRecording(ctx, sess.Recording, req)
	}
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", sess.Recording, err)
	}
	if req.Offset > meta.Size {
		return nil, api.Errorf(api.CodeInvalidArgument, "offset %d is past the recording's end (%d bytes)", req.Offset, meta.Size)
	}
	buf, err := recstore.ReadAt(ctx, s.js, meta, req.Offset, req.Limit)
	if err != nil {
		return nil, err
	}
	return &api.RecordingChunk{Data: buf, Size: meta.Size, EOF: req.Offset+int64(len(buf)) >= meta.Size}, nil
}

// legacyRecording serves a chunk of a recording made before recordings
// were sealed (the object store bucket).
func (s *Server) legacyRecording(ctx context.Context, name string, req api.RecordingRequest) (*api.RecordingChunk, error) {
	store, err := s.js.ObjectStore(ctx, api.RecordingsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, api.Errorf(api.CodeNotFound, "recording %s is not in the store", name)
	}
	if err != nil {
		return nil, fmt.Errorf("recordings store: %w", err)
	}
	obj, err := store.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, api.Errorf(api.CodeNotFound, "recording %s is not in the store", name)
	}
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	defer obj.Close()
	info, err := obj.Info()
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	size := int64(info.Size)
	if req.Offset > size {
		return nil, api.Errorf(api.CodeInvalidArgument, "offset %d is past the recording's end (%d bytes)", req.Offset, size)
	}
	if _, err := io.CopyN(io.Discard, obj, req.Offset); err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	buf := make([]byte, min(int64(req.Limit), size-req.Offset))
	if _, err := io.ReadFull(obj, buf); err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	return &api.RecordingChunk{Data: buf, Size: size, EOF: req.Offset+int64(len(buf)) >= size}, nil
}
