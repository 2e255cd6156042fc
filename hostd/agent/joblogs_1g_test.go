package agent_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// hugeLogBytes is how much TestJobPrinting1GiBIsCutAtTheDefaultBound's
// job prints: 1 GiB, the acceptance's figure, unless
// GPUAAS_TEST_JOB_LOG_BYTES says otherwise (a multiple of 1 KiB).
func hugeLogBytes(t *testing.T) int64 {
	n := int64(1 << 30)
	if s := os.Getenv("GPUAAS_TEST_JOB_LOG_BYTES"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= logstream.DefaultMaxBytes || v%1024 != 0 {
			t.Fatalf("GPUAAS_TEST_JOB_LOG_BYTES=%q: want a multiple of 1024 above %d", s, logstream.DefaultMaxBytes)
		}
		n = v
	}
	return n
}

// TestJobPrinting1GiBIsCutAtTheDefaultBound is the jobs acceptance's
// "Logs bound" case with a real controld and hostd agent, at the default
// bounds (a job's log 64 MiB, LOGS 1 GiB): a job prints 1 GiB in 1 KiB
// lines; its log keeps exactly the first 64 MiB (65,536 lines), then the
// cut marker and the marker saying how many bytes were not kept; the
// LOGS stream holds about the bound, far inside its own; this process
// (controld, the agent and its pump) never held the output: the heap's
// peak stays far below what the job printed. It logs the time the job
// took and the peak heap (timing is reported, not asserted).
func TestJobPrinting1GiBIsCutAtTheDefaultBound(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 1 GiB through a job's log")
	}
	size := hugeLogBytes(t)
	env, admin, allocID := jobLogFleet(t, 0) // 0: controld's default bound
	ctx := context.Background()

	var peakHeap atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peakHeap.Load() {
				peakHeap.Store(ms.HeapAlloc)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	// 1023 characters and a newline per line.
	begin := time.Now()
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: allocID,
		Run: fmt.Sprintf(`yes "$(head -c 1023 /dev/zero | tr '\0' x)" | head -c %d`, size)})
	if err != nil {
		t.Fatal(err)
	}
	var got *api.Job
	testutil.EventuallyWithin(t, 30*time.Minute, "the job to end", func() bool {
		got, err = admin.JobGet(ctx, j.ID)
		return err == nil && api.JobFinal(got.State)
	})
	took := time.Since(begin)
	close(stopSampling)
	<-sampled
	if got.State != api.JobSucceeded {
		t.Fatalf("job %s: %s (%s); want succeeded", j.ID, got.State, got.Reason)
	}

	// Every line of the log, page by page (not kept: only counted), from
	// 1 without a gap: the job's lines, the pump's markers, and last the
	// cut marker and the one saying how much was not kept.
	const bound = logstream.DefaultMaxBytes
	var (
		seq, stdoutLines, storedBytes, droppedBytes, droppedLines int64
		lastJobLine, cutAt                                        int64
		blamed                                                    string
		tail                                                      []api.LogLine
		after                                                     int64
		cursor                                                    uint64
	)
	for {
		page, err := admin.JobLogs(ctx, api.JobLogsRequest{ID: j.ID, After: after, Cursor: cursor, Limit: api.JobLogsMaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Lines {
			if seq++; l.Seq != seq {
				t.Fatalf("line %d follows line %d", l.Seq, seq-1)
			}
			switch {
			case l.Stream == api.LogStdout && len(l.Text) == 1023 && strings.Trim(l.Text, "x") == "":
				stdoutLines++
				storedBytes += 1024
				lastJobLine = l.Seq
			case l.Stream == api.LogMarker && strings.Contains(l.Text, "of output dropped here"):
				var n, b int64
				if _, err := fmt.Sscanf(l.Text, "[gpuaas] %d lines (%d bytes)", &n, &b); err != nil {
					t.Fatalf("line %d: %q: %v", l.Seq, l.Text, err)
				}
				droppedLines, droppedBytes = droppedLines+n, droppedBytes+b
				// The bus was up throughout: the job wrote faster than the
				// node published. The marker must not say otherwise.
				if strings.Contains(l.Text, "could not reach the bus") && blamed == "" {
					blamed = fmt.Sprintf("line %d: %q", l.Seq, l.Text)
				}
			case l.Stream == api.LogMarker && strings.Contains(l.Text, "output cut: this log reached its bound"):
				if cutAt != 0 || !strings.Contains(l.Text, fmt.Sprintf("its bound of %d bytes", bound)) {
					t.Errorf("line %d: %q: a second cut marker, or not at the default bound", l.Seq, l.Text)
				}
				cutAt = l.Seq
			case l.Stream == api.LogMarker:
			default:
				t.Fatalf("line %d: %s %d bytes %.40q: not the job's nor a marker", l.Seq, l.Stream, len(l.Text), l.Text)
			}
			if tail = append(tail, l); len(tail) > 1 {
				tail = tail[1:]
			}
		}
		after, cursor = page.After, page.Cursor
		if page.Ended {
			break
		}
	}
	if blamed != "" {
		t.Errorf("%s blames the bus, which was reachable throughout", blamed)
	}
	// The cut marker follows the last line kept; the pump's marker for
	// lines it dropped before the cut may come after it.
	if cutAt == 0 || cutAt < lastJobLine {
		t.Errorf("the cut marker at line %d, the job's last kept line %d; want the marker after it", cutAt, lastJobLine)
	}
	if want := fmt.Sprintf("%d bytes of output past the bound of %d bytes were not kept", size-bound, bound); len(tail) != 1 ||
		tail[0].Stream != api.LogMarker || !strings.Contains(tail[0].Text, want) {
		t.Errorf("the last line: %+v; want %q", tail, want)
	}
	// What the bound counted is the first 64 MiB of output: the lines
	// stored, and those the pump dropped (its buffer full) where a marker
	// says so.
	if storedBytes+droppedBytes != bound || stdoutLines+droppedLines != bound/1024 {
		t.Errorf("stored %d lines (%d bytes), dropped %d lines (%d bytes); want %d bytes (%d lines) together", stdoutLines,
			storedBytes, droppedLines, droppedBytes, bound, bound/1024)
	}

	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, logstream.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The stream holds this log only: at most the bound with its framing,
	// inside the stream's own limit.
	if info.State.Bytes > 2*uint64(bound) || info.Config.MaxBytes > 0 && info.State.Bytes > uint64(info.Config.MaxBytes) {
		t.Errorf("LOGS holds %d bytes (%d messages, limit %d) for a job bounded at %d", info.State.Bytes, info.State.Msgs,
			info.Config.MaxBytes, bound)
	}
	// The output was never held: the heap's peak (controld, the agent,
	// the pump's 4 MiB buffer, the bus client, the pages read here) stays
	// within a few times the bound, a quarter of the 1 GiB printed.
	if peak := peakHeap.Load(); peak > 256<<20 {
		t.Errorf("heap peaked at %d MiB while the job printed %d MiB", peak>>20, size>>20)
	}
	t.Logf("printed %d MiB in %s (%.0f MiB/s); stored %d lines (%d MiB), dropped %d lines (%d bytes) with their markers; "+
		"LOGS %d bytes in %d messages (limit %d); heap peak %d MiB", size>>20, took.Round(time.Millisecond),
		float64(size>>20)/took.Seconds(), stdoutLines, storedBytes>>20, droppedLines, droppedBytes, info.State.Bytes,
		info.State.Msgs, info.Config.MaxBytes, peakHeap.Load()>>20)
}
