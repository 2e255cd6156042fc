package controld

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/api"
)

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
