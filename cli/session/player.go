package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// castHeader is the first line of an asciicast v2 file.
type castHeader struct {
	Version       int     `json:"version"`
	Width         int     `json:"width"`
	Height        int     `json:"height"`
	IdleTimeLimit float64 `json:"idle_time_limit,omitempty"`
}

// Player plays an asciicast v2 recording to a terminal in real time:
// output ("o") events are written when their timestamp comes, resize
// ("r") events go to Resize, others (input, markers) are skipped.
type Player struct {
	Out io.Writer
	// Speed divides every delay: 2 plays twice as fast. Zero means 1.
	Speed float64
	// MaxIdle caps each pause (before Speed applies); zero keeps pauses
	// whole. A smaller idle_time_limit in the header wins.
	MaxIdle time.Duration
	// Resize, when set, is called with the recording's size first and
	// on each resize event.
	Resize func(cols, rows int) error
	// Now and Sleep are the clock; nil means the real one.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Play reads the recording from r and plays it until its end or ctx ends.
// Delays are measured from the start, so slow writes do not add up.
func (p *Player) Play(ctx context.Context, r io.Reader) error {
	now, sleep, speed := p.Now, p.Sleep, p.Speed
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	if speed <= 0 {
		speed = 1
	}
	br := bufio.NewReaderSize(r, 64<<10)
	line, err := readLine(br)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecording, err)
	}
	var hdr castHeader
	if err := json.Unmarshal(line, &hdr); err != nil || hdr.Version != 2 {
		return fmt.Errorf("%w: bad header %.80q", ErrBadRecording, line)
	}
	maxIdle := p.MaxIdle
	if limit := time.Duration(hdr.IdleTimeLimit * float64(time.Second)); limit > 0 && (maxIdle == 0 || limit < maxIdle) {
		maxIdle = limit
	}
	if p.Resize != nil && hdr.Width > 0 && hdr.Height > 0 {
		if err := p.Resize(hdr.Width, hdr.Height); err != nil {
			return err
		}
	}
	start := now()
	var played, last time.Duration // recording time, after idle capping; last event's raw time
	for n := 2; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read recording: %w", err)
		}
		if len(line) == 0 {
			continue
		}
		at, code, data, err := parseEvent(line)
		if err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrBadRecording, n, err)
		}
		gap := max(at-last, 0) // out-of-order timestamps play at once
		last = max(last, at)
		if maxIdle > 0 {
			gap = min(gap, maxIdle)
		}
		played += gap
		if d := start.Add(time.Duration(float64(played) / speed)).Sub(now()); d > 0 {
			if err := sleep(ctx, d); err != nil {
				return err
			}
		}
		switch code {
		case "o":
			if _, err := io.WriteString(p.Out, data); err != nil {
				return err
			}
		case "r":
			cols, rows, err := parseSize(data)
			if err != nil {
				return fmt.Errorf("%w: line %d: %v", ErrBadRecording, n, err)
			}
			if p.Resize != nil {
				if err := p.Resize(cols, rows); err != nil {
					return err
				}
			}
		}
	}
}

// readLine returns the next line without its newline, however long.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadBytes('\n')
	if errors.Is(err, io.EOF) && len(line) > 0 {
		err = nil
	}
	return bytes.TrimRight(line, "\r\n"), err
}

// parseEvent reads `[time, code, data]`.
func parseEvent(line []byte) (time.Duration, string, string, error) {
	var ev []json.RawMessage
	if err := json.Unmarshal(line, &ev); err != nil || len(ev) < 3 {
		return 0, "", "", fmt.Errorf("want [time, code, data], got %.80q", line)
	}
	var at float64
	var code, data string
	if json.Unmarshal(ev[0], &at) != nil || json.Unmarshal(ev[1], &code) != nil || json.Unmarshal(ev[2], &data) != nil || at < 0 {
		return 0, "", "", fmt.Errorf("want [time, code, data], got %.80q", line)
	}
	return time.Duration(at * float64(time.Second)), code, data, nil
}

// parseSize reads a resize event's "COLSxROWS".
func parseSize(s string) (cols, rows int, err error) {
	c, r, ok := strings.Cut(s, "x")
	cols, err1 := strconv.Atoi(c)
	rows, err2 := strconv.Atoi(r)
	if !ok || err1 != nil || err2 != nil || cols <= 0 || rows <= 0 {
		return 0, 0, fmt.Errorf("bad size %q, want COLSxROWS", s)
	}
	return cols, rows, nil
}

// ResizeSequence is the xterm control sequence asking the terminal to
// become cols×rows (CSI 8 ; rows ; cols t), as `asciinema play --resize`
// sends. Terminals that do not support it ignore it.
func ResizeSequence(cols, rows int) string { return fmt.Sprintf("\x1b[8;%d;%dt", rows, cols) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
