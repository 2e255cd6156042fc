package tasks

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// logFlushTimeout bounds how long a job's end waits for its last lines
// to reach the LOGS stream before it is reported: the report follows the
// lines, so a reader that sees the job ended has every line that could
// be published (docs/decisions/0022-logs-in-jetstream.md).
const logFlushTimeout = 30 * time.Second

// openJobLog starts the pump of a job's output to the LOGS stream; nil
// when this hostd publishes no logs (Env.Logs unset) or the ids cannot be
// subject tokens.
func openJobLog(env *Env, p hostproto.JobStartParams) *logstream.Pump {
	if env.Logs == nil || logstream.CheckToken("node", env.NodeID) != nil || logstream.CheckToken("job", p.JobID) != nil {
		return nil
	}
	cfg := logstream.PumpConfig{Publisher: env.Logs,
		Subject: logstream.Subject(env.NodeID, logstream.KindJob, p.JobID), ID: p.JobID,
		MaxBytes: p.LogMaxBytes, Now: env.now}
	if p.Attempt > 1 && p.LogNext > 0 {
		// A retry: its lines go on after the lost attempt's
		// (docs/jobs.md "Retries").
		cfg.Resume = &logstream.Checkpoint{Next: p.LogNext}
	}
	pump, err := logstream.NewPump(cfg)
	if err != nil {
		return nil
	}
	if p.Attempt > 1 {
		pump.Mark(AttemptMarker(p.Attempt, p.AttemptReason))
	}
	return pump
}

// stdout and stderr are where the job's processes write: the tail its
// report carries and, when there is one, its log pump.
func (j *runningJob) stdout() io.Writer {
	if j.logs == nil {
		return &j.output
	}
	return io.MultiWriter(&j.output, j.logs.Stdout())
}

func (j *runningJob) stderr() io.Writer {
	if j.logs == nil {
		return &j.output
	}
	return io.MultiWriter(&j.output, j.logs.Stderr())
}

// closeLog publishes the job's last lines and markers.
func (j *runningJob) closeLog() logstream.Stats {
	if j.logs == nil {
		return logstream.Stats{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), logFlushTimeout)
	defer cancel()
	return j.logs.Close(ctx)
}

// AttemptMarker is the log line that starts attempt n of a retried job,
// after the lines of the attempt the platform lost (reason).
func AttemptMarker(n int, reason string) string {
	return fmt.Sprintf("--- attempt %d (%s) ---", n, reason)
}
