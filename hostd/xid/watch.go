package xid

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DevKmsg is the kernel log device of a real host.
const DevKmsg = "/dev/kmsg"

// Watcher follows a kernel log and hands every hardware XID to a
// function. Opening /dev/kmsg reads the ring buffer from its oldest record,
// so a fault logged before hostd started is found again after a restart
// (with the same time: controld acts on each fault once).
type Watcher struct {
	// Path is /dev/kmsg, or the sim's file standing for it. Required.
	Path string
	// Boot is when the kernel's clock started (BootTime): record times
	// count from it.
	Boot time.Time
	// Poll is how often a plain file is checked for new records once read
	// to its end (default 200ms); /dev/kmsg blocks until one comes.
	Poll time.Duration
	Log  *slog.Logger
}

// Run follows the log until ctx ends, calling found for each hardware
// XID, in log order.
func (w *Watcher) Run(ctx context.Context, found func(Fault)) error {
	if w.Poll <= 0 {
		w.Poll = 200 * time.Millisecond
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	f, err := os.Open(w.Path)
	if err != nil {
		return fmt.Errorf("xid watch: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.Close() }) // unblocks a read of /dev/kmsg
	defer func() {
		if stop() {
			_ = f.Close()
		}
	}()
	r := bufio.NewReader(f)
	var partial strings.Builder
	for {
		line, err := r.ReadString('\n')
		partial.WriteString(line)
		if err == nil {
			w.handle(partial.String(), found)
			partial.Reset()
			continue
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, syscall.EPIPE):
			// /dev/kmsg: records were overwritten before we read them.
			w.Log.Warn("kernel log records lost (ring buffer overrun)")
			partial.Reset()
			continue
		case errors.Is(err, io.EOF):
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(w.Poll):
			}
		default:
			return fmt.Errorf("xid watch: %w", err)
		}
	}
}

func (w *Watcher) handle(record string, found func(Fault)) {
	f, ok := Parse(record, w.Boot)
	if !ok {
		return
	}
	if !Hardware(f.XID) {
		w.Log.Info("xid (not a hardware fault)", "gpu", f.GPU, "xid", f.XID, "message", f.Message)
		return
	}
	w.Log.Warn("xid: GPU fault", "gpu", f.GPU, "xid", f.XID, "message", f.Message)
	found(f)
}

// BootTime is when the kernel's clock started: btime of /proc/stat, in
// whole seconds, so that a record's time comes out the same after a
// restart (controld recognises a fault it has seen by its time). Where
// there is no /proc it is now.
func BootTime(now time.Time) time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return now
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(secs, 0).UTC()
			}
		}
	}
	return now
}
