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
)

// sessionsEndpoints are terminal sessions through the gateway and their
// recordings (controld/sessions).
func (s *Server) sessionsEndpoints() []endpointDef {
	return []endpointDef{
		s.mutation(api.EndpointSessionStart, gatewayOnly, s.sessionStart),
		s.mutation(api.EndpointSessionEnd, gatewayOnly, s.sessionEnd),
		s.mutation(api.EndpointSessionInterrupt, gatewayOnly, s.sessionInterrupt),
		s.query(api.EndpointSessionList, loggedIn, s.sessionList),
		s.query(api.EndpointSessionGet, loggedIn, s.sessionGet),
		s.query(api.EndpointSessionRecording, loggedIn, s.sessionRecording),
	}
}

func (s *Server) sessionStart(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SessionStartRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Gateway) == "" {
		req.Gateway = c.principal.Email
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		ts, err := sessions.Start(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return ts, sessionEffect("session.start", ts), nil
	}, nil
}

func (s *Server) sessionEnd(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SessionEndRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		ts, err := sessions.End(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return ts, sessionEffect("session.end", ts), nil
	}, nil
}

func (s *Server) sessionInterrupt(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SessionInterruptRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
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
		return api.SessionInterruptResponse{Sessions: list}, eff, nil
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

func (s *Server) sessionList(ctx context.Context, c *call) (any, error) {
	var req api.SessionListRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	list, err := sessions.List(ctx, s.pool, s.viewer(c), req)
	if err != nil {
		return nil, err
	}
	return api.SessionListResponse{Sessions: list}, nil
}

func (s *Server) sessionGet(ctx context.Context, c *call) (any, error) {
	var req api.SessionRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return sessions.Get(ctx, s.pool, s.viewer(c), req.ID)
}

// sessionRecording serves a chunk of a recording to whoever may see the
// session (sessions.Get decides): users never touch JetStream themselves.
func (s *Server) sessionRecording(ctx context.Context, c *call) (any, error) {
	var req api.RecordingRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
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
	store, err := s.js.ObjectStore(ctx, api.RecordingsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, api.Errorf(api.CodeNotFound, "no recordings are stored (bucket %s does not exist)", api.RecordingsBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("recordings store: %w", err)
	}
	obj, err := store.Get(ctx, sess.Recording)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, api.Errorf(api.CodeNotFound, "recording %s is not in the store", sess.Recording)
	}
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", sess.Recording, err)
	}
	defer obj.Close()
	info, err := obj.Info()
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", sess.Recording, err)
	}
	size := int64(info.Size)
	if req.Offset > size {
		return nil, api.Errorf(api.CodeInvalidArgument, "offset %d is past the recording's end (%d bytes)", req.Offset, size)
	}
	if _, err := io.CopyN(io.Discard, obj, req.Offset); err != nil {
		return nil, fmt.Errorf("recording %s: %w", sess.Recording, err)
	}
	buf := make([]byte, min(int64(req.Limit), size-req.Offset))
	if _, err := io.ReadFull(obj, buf); err != nil {
		return nil, fmt.Errorf("recording %s: %w", sess.Recording, err)
	}
	return api.RecordingChunk{Data: buf, Size: size, EOF: req.Offset+int64(len(buf)) >= size}, nil
}
