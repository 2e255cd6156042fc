package core

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The spool: a front with a spool directory (sshgate's
// Config.RecordingDir) keeps a PTY session's recording as the file
// rec-<session id>.frames there until it is uploaded and the session's
// index entry is closed. A gateway that stops without finishing (a crash,
// or a graceful stop that ran out of its grace) leaves the files behind,
// and its sessions running in the index. When it starts again, before it
// serves, the front lists them (Spooled), opens each (OpenSpooled),
// uploads it and ends its session as interrupted. The directory must be
// this gateway instance's own.

const (
	spoolPrefix = "rec-"
	spoolSuffix = ".frames"
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

// SpoolPath is the spool file of session sessionID in dir.
func SpoolPath(dir, sessionID string) string {
	return filepath.Join(dir, spoolPrefix+sessionID+spoolSuffix)
}

// OpenSpooled reads a recording a previous run left in the spool: its
// header, and how much output it holds. It is marked recovered.
func OpenSpooled(path string, now func() time.Time) (*Recorder, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r := &Recorder{now: now, path: path, recovered: true, f: f, w: bufio.NewWriter(io.Discard)}
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

// Spooled lists the session ids of the recordings in the spool.
func Spooled(dir string) ([]string, error) {
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
