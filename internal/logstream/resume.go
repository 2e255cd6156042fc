package logstream

import (
	"strings"
	"time"
)

// Resuming a source across a restart of its publisher
// (docs/decisions/0026-workload-logs-across-restarts.md): a source read
// from a file (a container's log) gives each line the file's position
// after it; once a line is acknowledged by the stream the pump tells
// PumpConfig.OnSent a Checkpoint, which the publisher keeps. A new pump
// given that Checkpoint (PumpConfig.Resume), reading the file from its
// position, numbers the lines that follow from where the first stopped:
// no gap, no repeat. Lines published but not yet in a checkpoint (hostd
// stopped between the ack and its write) are read and numbered again the
// same way; readers pass line numbers they have seen (Read) and the
// stream stores a batch once within its duplicate window.

// Position is a place in a source: File names the file (its inode: a
// rotated log is a new file), Offset the byte where the next line starts.
type Position struct {
	File   uint64 `json:"file"`
	Offset int64  `json:"offset"`
}

// Checkpoint is where a source's log can go on from: its next line
// number, its position, and what its bound counted so far.
type Checkpoint struct {
	Next     int64    `json:"next"`
	Pos      Position `json:"pos"`
	Kept     int64    `json:"kept"`
	Cut      bool     `json:"cut,omitempty"`
	CutBytes int64    `json:"cut_bytes,omitempty"`
	at       int64    // the pump's count of positions when it was taken
}

// Line adds one whole line of stream written at t (zero: now), the
// source being at pos after it. A line longer than MaxLineBytes is split
// into lines of that size; only the last is a point to resume from, so a
// restart reads the whole line again and numbers its pieces the same.
func (p *Pump) Line(t time.Time, stream, text string, pos Position) {
	for len(text) > MaxLineBytes {
		p.addAt(t, stream, text[:MaxLineBytes], MaxLineBytes, nil)
		text = text[MaxLineBytes:]
	}
	p.addAt(t, stream, strings.TrimSuffix(text, "\r"), int64(len(text))+1, &pos)
}

// Mark adds a marker line of gpuaas' own (what could not be recovered).
func (p *Pump) Mark(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enqueue(Line{Time: p.cfg.Now(), Stream: Marker, Text: "[gpuaas] " + text})
}

// Abandon stops the pump without closing markers or waiting for what is
// queued: its publisher stops (hostd stops) and a pump resuming from the
// last checkpoint reads the rest again.
func (p *Pump) Abandon() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// idleCheckpoint tells OnSent the source's position when nothing waits to
// be published and the position moved since the last checkpoint (lines
// past the bound are counted, not published). Not while lines are being
// dropped: a restart reads them again instead.
func (p *Pump) idleCheckpoint() {
	if p.cfg.OnSent == nil {
		return
	}
	p.mu.Lock()
	if p.posAt == p.ckAt || p.dropN > 0 || len(p.queue) > 0 {
		p.mu.Unlock()
		return
	}
	ck := Checkpoint{Next: p.next, Pos: p.pos, Kept: p.kept, Cut: p.cut, CutBytes: p.cutBytes, at: p.posAt}
	p.mu.Unlock()
	p.cfg.OnSent(ck)
	p.mu.Lock()
	p.ckAt = max(p.ckAt, ck.at)
	p.mu.Unlock()
}
