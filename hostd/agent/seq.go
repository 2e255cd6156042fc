package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// seqFile holds the ceiling of the report sequence numbers this node may
// have used: every number handed out is below it.
const seqFile = "report_seq"

// seqBlock is how many sequence numbers are reserved with one durable
// write: the file is written once per seqBlock reports, and a restart
// skips what was left of the block.
const seqBlock = 1 << 16

// sequencer hands out the report sequence numbers (hostproto.ReportStamp.Seq):
// strictly increasing over the node's whole life, restarts included, so
// controld can refuse any number it has already seen.
//
// Numbers are reserved a block at a time: the ceiling is written durably
// before any number below it is used, so a crash never reuses one. A start
// also begins at the clock (nanoseconds since 1970) when that is higher,
// so a state directory restored from an old backup, whose ceiling is
// behind what controld accepted, catches up by itself instead of having
// every report refused.
type sequencer struct {
	path string

	// mu protects the following.
	mu      sync.Mutex
	next    uint64 // the next number to hand out
	ceiling uint64 // numbers up to here (excluded) are reserved on disk
}

// openSequencer reads the ceiling in dir and reserves the first block.
func openSequencer(dir string, now time.Time) (*sequencer, error) {
	s := &sequencer{path: filepath.Join(dir, seqFile)}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read report sequence: %w", err)
	default:
		if s.next, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return nil, fmt.Errorf("report sequence in %s is corrupt: %w", s.path, err)
		}
	}
	if ns := now.UnixNano(); ns > 0 && uint64(ns) > s.next {
		s.next = uint64(ns)
	}
	if s.next == 0 {
		s.next = 1
	}
	if err := s.reserve(); err != nil {
		return nil, err
	}
	return s, nil
}

// reserve writes a new ceiling one block above next. Called with mu held
// (or before the sequencer is shared).
func (s *sequencer) reserve() error {
	if s.next > math.MaxInt64-seqBlock {
		// controld stores sequence numbers as bigint; this is centuries of
		// nanoseconds away.
		return errors.New("report sequence exhausted")
	}
	ceiling := s.next + seqBlock
	if err := writeFileAtomic(s.path, []byte(strconv.FormatUint(ceiling, 10)+"\n"), 0o600, true); err != nil {
		return fmt.Errorf("reserve report sequence: %w", err)
	}
	s.ceiling = ceiling
	return nil
}

// take returns the next sequence number.
func (s *sequencer) take() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= s.ceiling {
		if err := s.reserve(); err != nil {
			return 0, err
		}
	}
	n := s.next
	s.next++
	return n, nil
}

// sealReport stamps report as a report of m (setting *stamp, the
// report's own ReportStamp, to m's kind and the next sequence number) and
// seals it with the node's key: the envelope's payload type is the one m
// declares.
func sealReport[Req, Resp any](a *Agent, m hostproto.Message[Req, Resp], stamp *hostproto.ReportStamp, report *Req) (hostproto.Sealed[Req], error) {
	kind := m.Spec().Kind
	seq, err := a.seq.take()
	if err != nil {
		return hostproto.Sealed[Req]{}, fmt.Errorf("seal %s: %w", kind, err)
	}
	*stamp = hostproto.ReportStamp{Kind: kind, Seq: seq, SentAt: a.now()}
	return hostproto.Seal(a.key, report)
}
