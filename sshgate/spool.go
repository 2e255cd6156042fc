package sshgate

import (
	"context"
	"errors"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
)

// The spool's format and its recordings are the core's (gateway/core,
// spool.go); what a crash left is recovered here, before serving.

// recoverTimeout bounds recovering what the last run left.
const recoverTimeout = time.Minute

// recoverInterrupted ends, as interrupted, the sessions the last run of
// this gateway left running: first those with a recording in the spool
// (uploaded, so what was recorded is kept), then, at controld, every other
// one indexed under this gateway's name. Called before serving. Failures
// are logged: the files stay for the next start.
func (g *Gateway) recoverInterrupted(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	if g.cfg.RecordingDir != "" {
		ids, err := core.Spooled(g.cfg.RecordingDir)
		if err != nil {
			g.log.Error("read the recording spool", "dir", g.cfg.RecordingDir, "err", err)
		}
		for _, id := range ids {
			g.recoverRecording(ctx, id)
		}
	}
	resp, err := g.cfg.Client.SessionInterrupt(ctx, api.SessionInterruptRequest{Gateway: g.cfg.Name})
	if err != nil {
		g.log.Error("mark the sessions the last run left running as interrupted", "gateway", g.cfg.Name, "err", err)
		return
	}
	if n := len(resp.Sessions); n > 0 {
		g.log.Warn("sessions the last run left running marked interrupted", "sessions", n)
	}
}

// recoverRecording uploads one leftover recording and ends its session as
// interrupted, then removes it from the spool.
func (g *Gateway) recoverRecording(ctx context.Context, sessionID string) {
	path := core.SpoolPath(g.cfg.RecordingDir, sessionID)
	rec, err := core.OpenSpooled(path, g.cfg.Now)
	if err != nil {
		g.log.Error("recover a recording; leaving it in the spool", "session", sessionID, "err", err)
		return
	}
	req := api.SessionEndRequest{ID: sessionID, Bytes: rec.Recorded(), Interrupted: true}
	chunks, err := g.upload(ctx, sessionID, rec)
	if err != nil {
		_ = rec.Close()
		g.log.Error("upload a recovered recording; leaving it in the spool", "session", sessionID, "err", err)
		return
	}
	req.Recording, req.RecordingChunks = sessionID, chunks
	_, err = g.cfg.Client.SessionEnd(ctx, req, api.WithIdempotencyKey("sshgate-session-recover-"+sessionID))
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		_ = rec.Close()
		g.log.Error("end a recovered session; leaving its recording in the spool", "session", sessionID, "err", err)
		return
	}
	if err := rec.Remove(); err != nil {
		g.log.Warn("remove a recovered recording", "session", sessionID, "err", err)
	}
	g.log.Warn("recovered the recording of a session the last run left running", "session", sessionID, "bytes", rec.Recorded())
}
