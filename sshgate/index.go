package sshgate

import (
	"context"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// The session index and the recordings' upload are the core's
// (gateway/core, index.go); the front counts sessions in its metrics and
// finishes them in the background, which Run waits for.

// finishTimeout bounds uploading a recording and closing its index entry
// after a session.
const finishTimeout = 5 * time.Minute

// startIndex opens the session's entry in controld's index and returns its
// id. A session that cannot be indexed is not served.
func (g *Gateway) startIndex(ctx context.Context, id sshcert.Identity, alloc, kind, command string) (string, error) {
	sessionID, err := g.core.StartSession(ctx, id.UserID, alloc, kind, command)
	if err != nil {
		return "", err
	}
	g.metrics.started(kind)
	return sessionID, nil
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
		g.core.EndSession(ctx, sessionID, rec, res.bytes, res.exit)
	}()
}
