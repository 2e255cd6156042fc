package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// The session index: every session and port forward a front serves is
// opened in controld's index (session.start) before it is served, and
// closed (session.end) with its bytes, exit status and recording after; a
// session that cannot be indexed is not served. Recordings are uploaded
// into the sealed recordings stream (internal/recstore) as the session
// id's chunks before the entry is closed, and controld seals them.

const (
	// maxIndexedCommand bounds the command stored in the session index.
	maxIndexedCommand = 4096
	// recoverTimeout bounds recovering what the last run left.
	recoverTimeout = time.Minute
)

// OpenRecordings makes the recordings stream ready to write to (a stream
// controld creates; a gateway may write chunks there, nothing else).
func (c *Core) OpenRecordings() error {
	js, err := jetstream.New(c.cfg.Client.Conn())
	if err != nil {
		return fmt.Errorf("recordings: %w", err)
	}
	c.mu.Lock()
	c.recordings = js
	c.mu.Unlock()
	if c.cfg.RecordingDir != "" {
		if err := os.MkdirAll(c.cfg.RecordingDir, 0o700); err != nil {
			return fmt.Errorf("recording spool: %w", err)
		}
	}
	return nil
}

// StartSession opens a session's entry in controld's index and returns
// its id.
func (c *Core) StartSession(ctx context.Context, userID, alloc, kind, command string) (string, error) {
	if len(command) > maxIndexedCommand {
		command = command[:maxIndexedCommand] + "…"
	}
	ts, err := gateproto.SessionStart(ctx, c.cfg.Client, gateproto.SessionStartRequest{
		UserID:       userID,
		AllocationID: alloc,
		Kind:         kind,
		Command:      command,
		Gateway:      c.cfg.Name,
	})
	if err != nil {
		return "", fmt.Errorf("index %s session: %w", kind, err)
	}
	return ts.ID, nil
}

// EndSession uploads the session's recording (rec, if any) and closes its
// index entry with bytes and exit (nil when the node sent no exit
// status). A spooled recording stays in the spool until the entry is
// closed: if that fails, the next start recovers both.
func (c *Core) EndSession(ctx context.Context, sessionID string, rec *Recorder, bytes int64, exit *int) {
	req := gateproto.SessionEndRequest{ID: sessionID, Bytes: bytes, ExitStatus: exit}
	ended := false
	if rec != nil {
		if chunks, err := c.upload(ctx, sessionID, rec); err != nil {
			c.log.Error("upload recording", "session", sessionID, "err", err)
		} else {
			req.Recording, req.RecordingChunks = sessionID, chunks
		}
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
		_, err := gateproto.SessionEnd(ctx, c.cfg.Client, req, key)
		if err == nil {
			ended = true
			return
		}
		if attempt == 4 || !errors.Is(err, api.ErrUnavailable) {
			c.log.Error("close session index entry", "session", sessionID, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// NewSessionRecorder starts the recording of session sessionID: in the
// spool (Config.RecordingDir) under its id, recovered after a crash, or
// else an unlinked temporary file.
func (c *Core) NewSessionRecorder(sessionID, term string, width, height int) (*Recorder, error) {
	if c.cfg.RecordingDir == "" {
		return NewRecorder(os.TempDir(), "", term, width, height, c.cfg.MaxRecordingBytes, c.cfg.Now)
	}
	return NewRecorder(c.cfg.RecordingDir, sessionID, term, width, height, c.cfg.MaxRecordingBytes, c.cfg.Now)
}

// upload streams the recording, converted to asciicast v2, into the
// recordings stream as the session id's chunks and returns how many it
// wrote; controld seals them when the session ends. Memory stays bounded:
// the store reads the pipe chunk by chunk.
func (c *Core) upload(ctx context.Context, sessionID string, rec *Recorder) (int, error) {
	c.mu.Lock()
	js := c.recordings
	c.mu.Unlock()
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

// RecoverInterrupted ends, as interrupted, the sessions the last run of
// this gateway left running: first those with a recording in the spool
// (uploaded, so what was recorded is kept), then, at controld, every other
// one indexed under this gateway's name. Called before serving. Failures
// are logged: the files stay for the next start.
func (c *Core) RecoverInterrupted(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	if c.cfg.RecordingDir != "" {
		ids, err := Spooled(c.cfg.RecordingDir)
		if err != nil {
			c.log.Error("read the recording spool", "dir", c.cfg.RecordingDir, "err", err)
		}
		for _, id := range ids {
			c.recoverRecording(ctx, id)
		}
	}
	resp, err := gateproto.SessionInterrupt(ctx, c.cfg.Client, gateproto.SessionInterruptRequest{Gateway: c.cfg.Name})
	if err != nil {
		c.log.Error("mark the sessions the last run left running as interrupted", "gateway", c.cfg.Name, "err", err)
		return
	}
	if n := len(resp.Sessions); n > 0 {
		c.log.Warn("sessions the last run left running marked interrupted", "sessions", n)
	}
}

// recoverRecording uploads one leftover recording and ends its session as
// interrupted, then removes it from the spool.
func (c *Core) recoverRecording(ctx context.Context, sessionID string) {
	path := SpoolPath(c.cfg.RecordingDir, sessionID)
	rec, err := OpenSpooled(path, c.cfg.Now)
	if err != nil {
		c.log.Error("recover a recording; leaving it in the spool", "session", sessionID, "err", err)
		return
	}
	req := gateproto.SessionEndRequest{ID: sessionID, Bytes: rec.Recorded(), Interrupted: true}
	chunks, err := c.upload(ctx, sessionID, rec)
	if err != nil {
		_ = rec.Close()
		c.log.Error("upload a recovered recording; leaving it in the spool", "session", sessionID, "err", err)
		return
	}
	req.Recording, req.RecordingChunks = sessionID, chunks
	_, err = gateproto.SessionEnd(ctx, c.cfg.Client, req, api.WithIdempotencyKey("sshgate-session-recover-"+sessionID))
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		_ = rec.Close()
		c.log.Error("end a recovered session; leaving its recording in the spool", "session", sessionID, "err", err)
		return
	}
	if err := rec.Remove(); err != nil {
		c.log.Warn("remove a recovered recording", "session", sessionID, "err", err)
	}
	c.log.Warn("recovered the recording of a session the last run left running", "session", sessionID, "bytes", rec.Recorded())
}
