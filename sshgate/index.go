package sshgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

const (
	// maxIndexedCommand bounds the command stored in the session index.
	maxIndexedCommand = 4096
	// finishTimeout bounds uploading a recording and closing its index
	// entry after a session.
	finishTimeout = 5 * time.Minute
)

// recordingsStore is where recordings are written (internal/recstore): a
// stream controld creates; a gateway may write chunks there, nothing else.
func recordingsStore(nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("recordings: %w", err)
	}
	return js, nil
}

// startIndex opens the session's entry in controld's index and returns its
// id. A session that cannot be indexed is not served.
func (g *Gateway) startIndex(ctx context.Context, id sshcert.Identity, alloc, kind, command string) (string, error) {
	ts, err := g.cfg.Client.SessionStart(ctx, api.SessionStartRequest{
		UserID:       id.UserID,
		AllocationID: alloc,
		Kind:         kind,
		Command:      truncate(command, maxIndexedCommand),
		Gateway:      g.cfg.Name,
	})
	if err != nil {
		return "", fmt.Errorf("index %s session: %w", kind, err)
	}
	g.metrics.started(kind)
	return ts.ID, nil
}

// sessionResult is how a session ended, for its index entry.
type sessionResult struct {
	bytes int64
	exit  *int // nil when the node sent no exit status
}

// finishSession uploads the recording (if any) and closes the index entry,
// in the background so the client is not kept waiting. Run waits for it.
// The caller holds a g.bg count across the call.
func (g *Gateway) finishSession(sessionID string, rec *core.Recorder, res sessionResult) {
	g.metrics.ended(res.bytes)
	g.bg.add()
	go func() {
		defer g.bg.done()
		ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		defer cancel()
		req := api.SessionEndRequest{ID: sessionID, Bytes: res.bytes, ExitStatus: res.exit}
		ended := false
		if rec != nil {
			if chunks, err := g.upload(ctx, sessionID, rec); err != nil {
				g.log.Error("upload recording", "session", sessionID, "err", err)
			} else {
				req.Recording, req.RecordingChunks = sessionID, chunks
			}
			// A spooled recording stays until its entry is closed: if
			// that fails, the next start recovers both.
			defer func() {
				if ended {
					_ = rec.Remove()
				} else {
					_ = rec.Close()
				}
			}()
		}
		// session.end is idempotent: retry a transient failure with the
		// same key.
		key := api.WithIdempotencyKey("sshgate-session-end-" + sessionID)
		for attempt, wait := 1, time.Second; ; attempt, wait = attempt+1, wait*2 {
			_, err := g.cfg.Client.SessionEnd(ctx, req, key)
			if err == nil {
				ended = true
				return
			}
			if attempt == 4 || !errors.Is(err, api.ErrUnavailable) {
				g.log.Error("close session index entry", "session", sessionID, "err", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
}

// recordingDir is where recordings are written: the spool, or the
// temporary directory.
func (g *Gateway) recordingDir() string {
	if g.cfg.RecordingDir != "" {
		return g.cfg.RecordingDir
	}
	return os.TempDir()
}

// upload streams the recording, converted to asciicast v2, into the
// recordings stream as the session id's chunks and returns how many it
// wrote; controld seals them when the session ends. Memory stays bounded:
// the store reads the pipe chunk by chunk.
func (g *Gateway) upload(ctx context.Context, sessionID string, rec *core.Recorder) (int, error) {
	g.mu.Lock()
	js := g.recordings
	g.mu.Unlock()
	if js == nil {
		return 0, errors.New("no recordings store")
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(rec.WriteAsciicast(pw)) }()
	chunks, err := recstore.Put(ctx, js, sessionID, pr)
	pr.CloseWithError(errors.New("upload ended")) // unblocks the writer if Put stopped early
	if err != nil {
		return 0, err
	}
	return chunks, nil
}
