package sshgate

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// The spool: with Config.RecordingDir, a PTY session's recording is the
// file rec-<session id>.frames there until it is uploaded and the
// session's index entry is closed. A gateway that stops without finishing
// (a crash, or a graceful stop that ran out of ShutdownGrace) leaves the
// files behind, and its sessions running in the index. When it starts
// again, before it serves, recoverInterrupted uploads each leftover
// recording and ends its session as interrupted, then has controld mark
// the rest of its sessions still running (those without a recording)
// interrupted too. The directory must be this gateway instance's own.

const (
	spoolPrefix = "rec-"
	spoolSuffix = ".frames"
	// recoverTimeout bounds recovering what the last run left.
	recoverTimeout = time.Minute
)

// spoolHeader is the payload of a spooled recording's header frame: what
// the recording's cast header needs.
type spoolHeader struct {
	Term   string `json:"term,omitempty"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Start  int64  `json:"start"` // Unix nanoseconds
	Limit  int64  `json:"limit"`
}

func spoolPath(dir, sessionID string) string {
	return filepath.Join(dir, spoolPrefix+sessionID+spoolSuffix)
}

// openSpooled reads a recording a previous run left in the spool: its
// header, and how much output it holds. It is marked recovered.
func openSpooled(path string, now func() time.Time) (*recorder, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r := &recorder{now: now, path: path, recovered: true, f: f, w: bufio.NewWriter(io.Discard)}
	in := bufio.NewReader(f)
	var head [frameHead]byte
	var payload []byte
	for first := true; ; first = false {
		if _, err := io.ReadFull(in, head[:]); err != nil {
			if first {
				f.Close()
				return nil, fmt.Errorf("recording %s: no header", path)
			}
			break // the end, or a frame a crash cut
		}
		n := binary.BigEndian.Uint32(head[9:13])
		if n > maxFrame {
			break
		}
		payload = append(payload[:0], make([]byte, n)...)
		if _, err := io.ReadFull(in, payload); err != nil {
			break
		}
		switch {
		case first && head[0] != frameHeader:
			f.Close()
			return nil, fmt.Errorf("recording %s: no header", path)
		case first:
			var h spoolHeader
			if err := json.Unmarshal(payload, &h); err != nil {
				f.Close()
				return nil, fmt.Errorf("recording %s: header: %w", path, err)
			}
			r.term, r.width, r.height, r.limit, r.start = h.Term, h.Width, h.Height, h.Limit, time.Unix(0, h.Start)
		case head[0] == frameOutput:
			r.recorded += int64(n)
		}
	}
	r.truncated = r.limit > 0 && r.recorded >= r.limit
	return r, nil
}

// spooled lists the session ids of the recordings in the spool.
func spooled(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(name, spoolPrefix) && strings.HasSuffix(name, spoolSuffix) {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(name, spoolPrefix), spoolSuffix))
		}
	}
	return out, nil
}

// recoverInterrupted ends, as interrupted, the sessions the last run of
// this gateway left running: first those with a recording in the spool
// (uploaded, so what was recorded is kept), then, at controld, every other
// one indexed under this gateway's name. Called before serving. Failures
// are logged: the files stay for the next start.
func (g *Gateway) recoverInterrupted(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	if g.cfg.RecordingDir != "" {
		ids, err := spooled(g.cfg.RecordingDir)
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
	path := spoolPath(g.cfg.RecordingDir, sessionID)
	rec, err := openSpooled(path, g.cfg.Now)
	if err != nil {
		g.log.Error("recover a recording; leaving it in the spool", "session", sessionID, "err", err)
		return
	}
	req := api.SessionEndRequest{ID: sessionID, Bytes: rec.recorded, Interrupted: true}
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
	g.log.Warn("recovered the recording of a session the last run left running", "session", sessionID, "bytes", rec.recorded)
}
