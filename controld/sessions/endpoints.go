package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// Deps are what terminal sessions' endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB store.Querier
	// JS holds the recordings (internal/recstore).
	JS  jetstream.JetStream
	Now func() time.Time
}

// Endpoints are terminal sessions through the gateway and their
// recordings (docs/decisions/0069-domain-endpoints.md).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(gateproto.OpSessionStart, h.start),
		endpoint.Mutation(gateproto.OpSessionEnd, h.end),
		endpoint.Mutation(gateproto.OpSessionInterrupt, h.interrupt),
		endpoint.Query(api.OpSessionList, h.list),
		endpoint.Query(api.OpSessionGet, h.get),
		endpoint.Query(api.OpSessionRecording, h.recording),
	}
}

type handlers struct{ Deps }

func (h handlers) start(_ context.Context, r *endpoint.Request, req gateproto.SessionStartRequest) (endpoint.Work[api.TerminalSession], error) {
	if strings.TrimSpace(req.Gateway) == "" {
		req.Gateway = r.Principal.Email
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TerminalSession, mutate.Effect, error) {
		ts, err := Start(ctx, tx, req, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &ts, sessionEffect("session.start", ts), nil
	}, nil
}

func (h handlers) end(ctx context.Context, r *endpoint.Request, req gateproto.SessionEndRequest) (endpoint.Work[api.TerminalSession], error) {
	if err := h.sealRecording(ctx, r, &req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TerminalSession, mutate.Effect, error) {
		ts, err := End(ctx, tx, req, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &ts, sessionEffect("session.end", ts), nil
	}, nil
}

func (h handlers) interrupt(_ context.Context, r *endpoint.Request, req gateproto.SessionInterruptRequest) (endpoint.Work[gateproto.SessionInterruptResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*gateproto.SessionInterruptResponse, mutate.Effect, error) {
		list, err := Interrupt(ctx, tx, req.Gateway, h.Now())
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

func viewerOf(r *endpoint.Request) Viewer {
	return Viewer{UserID: r.Principal.UserID, Operator: r.Principal.IsOperator()}
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.SessionListRequest) (*api.SessionListResponse, error) {
	list, err := List(ctx, h.DB, viewerOf(r), req)
	if err != nil {
		return nil, err
	}
	return &api.SessionListResponse{Sessions: list}, nil
}

func (h handlers) get(ctx context.Context, r *endpoint.Request, req api.SessionRef) (*api.TerminalSession, error) {
	return endpoint.Pointer(Get(ctx, h.DB, viewerOf(r), req.ID))
}

// sealRecording seals the recording the gateway wrote of the session
// (internal/recstore): a recording is named after its session, and only
// chunks that are there and whole are sealed. A recording that cannot be
// sealed is logged and left out: the session is still closed.
func (h handlers) sealRecording(ctx context.Context, r *endpoint.Request, req *gateproto.SessionEndRequest) error {
	if req.Recording == "" {
		return nil
	}
	if req.Recording != req.ID {
		return api.Errorf(api.CodeInvalidArgument, "a session's recording is named after it: %q is not %q", req.Recording, req.ID)
	}
	if req.RecordingChunks == 0 {
		return nil // an older gateway's, in the object store bucket
	}
	if _, err := recstore.Seal(ctx, h.JS, req.Recording, req.RecordingChunks, h.Now()); err != nil {
		r.Log.Error("seal recording; the session ends without it", "session", req.ID, "err", err)
		req.Recording, req.RecordingChunks = "", 0
	}
	return nil
}

// recording serves a chunk of a recording to whoever may see the
// session (Get decides): users never touch JetStream themselves.
func (h handlers) recording(ctx context.Context, r *endpoint.Request, req api.RecordingRequest) (*api.RecordingChunk, error) {
	if req.Offset < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "offset must not be negative")
	}
	if req.Limit <= 0 || req.Limit > api.RecordingChunkMax {
		req.Limit = api.RecordingChunkMax
	}
	sess, err := Get(ctx, h.DB, viewerOf(r), req.ID)
	if err != nil {
		return nil, err
	}
	if sess.Recording == "" {
		return nil, api.Errorf(api.CodeNotFound, "session %s has no recording: only sessions with a terminal are recorded", req.ID)
	}
	meta, err := recstore.Open(ctx, h.JS, sess.Recording)
	if errors.Is(err, recstore.ErrNotFound) {
		return h.legacyRecording(ctx, sess.Recording, req)
	}
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", sess.Recording, err)
	}
	if req.Offset > meta.Size {
		return nil, api.Errorf(api.CodeInvalidArgument, "offset %d is past the recording's end (%d bytes)", req.Offset, meta.Size)
	}
	buf, err := recstore.ReadAt(ctx, h.JS, meta, req.Offset, req.Limit)
	if err != nil {
		return nil, err
	}
	return &api.RecordingChunk{Data: buf, Size: meta.Size, EOF: req.Offset+int64(len(buf)) >= meta.Size}, nil
}

// legacyRecording serves a chunk of a recording made before recordings
// were sealed (the object store bucket).
func (h handlers) legacyRecording(ctx context.Context, name string, req api.RecordingRequest) (*api.RecordingChunk, error) {
	store, err := h.JS.ObjectStore(ctx, api.RecordingsBucket)
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
