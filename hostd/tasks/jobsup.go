package tasks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// EnvOpener opens an allocation's environment: hostd/env's Factory. Jobs
// run through it, as the renter (CONTRIBUTING.md, "add a workload kind").
type EnvOpener interface {
	Open(ctx context.Context, a hostenv.Alloc) (hostenv.Environment, error)
}

// supervisors holds the job supervisor of each running hostd, by its
// environment opener: a handler's Env is copied per task, but its opener
// is the agent's one, made when hostd starts (sim hosts, cli/daemon). A
// restarted hostd, even in the same process (gpuaas dev, tests), has a
// new opener and so knows none of the jobs before it.
var supervisors sync.Map // EnvOpener → *jobSupervisor

func supervisorFor(envs EnvOpener) *jobSupervisor {
	s, _ := supervisors.LoadOrStore(envs, &jobSupervisor{jobs: map[string]*runningJob{}})
	return s.(*jobSupervisor)
}

// jobSupervisor runs this hostd's jobs. A job's processes belong to hostd,
// not to the task that started it, so it runs on when every client is
// gone; it does not outlive hostd's own memory of it: a restarted hostd
// reports a job it does not know as unknown (lost,
// docs/decisions/0015-jobs-on-the-node.md).
type jobSupervisor struct {
	// mu protects the following.
	mu   sync.Mutex
	jobs map[string]*runningJob
	// stopped are jobs stopped before this hostd started them (job.stop
	// and job.start are node tasks, delivered in no set order): their
	// job.start does not start them.
	stopped map[string]bool
	// reaped are jobs whose container a previous hostd left and this one
	// removed when it started (jobimage_restart.go).
	reaped map[string]bool
}

// markStoppedAtStart records that job id's container, left by a previous
// hostd, was removed when this one started.
func (s *jobSupervisor) markStoppedAtStart(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reaped == nil {
		s.reaped = map[string]bool{}
	}
	s.reaped[id] = true
}

// stoppedAtStart reports whether markStoppedAtStart recorded id.
func (s *jobSupervisor) stoppedAtStart(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reaped[id]
}

// getOrForbid returns a job started here; for one not started, it
// records that it was stopped, so that its job.start, when it comes,
// does not start it.
func (s *jobSupervisor) getOrForbid(id string) *runningJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		return j
	}
	if s.stopped == nil {
		s.stopped = map[string]bool{}
	}
	s.stopped[id] = true
	return nil
}

// runningJob is one job: its current process and, once it ended, its
// report.
type runningJob struct {
	id      string
	started time.Time
	output  tailBuffer
	logs    *logstream.Pump // nil: no log stream (joblog.go)
	done    chan struct{}   // closed when report is final
	// mu protects the following.
	mu        sync.Mutex
	phase     string
	proc      hostenv.Process
	cancelled bool
	timedOut  bool
	report    hostproto.JobReport
	// stopPrepare ends the preparation of the job's container (its
	// image's pull and load, jobimage.go) while it runs; nil otherwise.
	stopPrepare context.CancelFunc
}

// start starts a job unless it runs already (a job.start delivered again
// is not a second job); nil when it was stopped before it started.
func (s *jobSupervisor) start(e hostenv.Environment, p hostproto.JobStartParams, logs func() *logstream.Pump, now func() time.Time) *runningJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[p.JobID]; ok {
		return j
	}
	if s.stopped[p.JobID] {
		return nil
	}
	j := &runningJob{id: p.JobID, started: now(), logs: logs(), done: make(chan struct{})}
	s.jobs[p.JobID] = j
	go j.run(e, p, now)
	return j
}

func (s *jobSupervisor) get(id string) *runningJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id]
}

// run runs setup (when there is one) then run, each by the user's shell,
// and records how the job ended. A timeout ends the current phase with
// SIGTERM, then SIGKILL after stopGrace.
func (j *runningJob) run(e hostenv.Environment, p hostproto.JobStartParams, now func() time.Time) {
	defer close(j.done)
	defer func() { _ = e.Close() }()
	var timeout <-chan time.Time
	if p.Timeout > 0 {
		t := time.NewTimer(p.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	started := j.started
	rep := hostproto.JobReport{JobID: j.id, Ended: true, StartedAt: &started}
	phases := []struct{ name, script string }{{api.JobPhaseSetup, p.Setup}, {api.JobPhaseRun, p.Run}}
	if ie, ok := e.(*jobImageEnv); ok && !j.enterImage(ie, &rep) {
		phases = nil // jobimage.go
	} else if p.Workdir != "" && !j.enterWorkdir(e, p, timeout, &rep) {
		phases = nil // jobworkdir.go
	}
	for _, ph := range phases {
		if ph.script == "" {
			continue
		}
		rep.Phase = ph.name
		st, err := j.phase1(e, ph.name, inWorkdir(p.Workdir, ph.script), p.Env, timeout)
		if err != nil {
			rep.ExitCode, rep.Reason = 255, fmt.Sprintf("%s: cannot start: %v", ph.name, err)
			break
		}
		rep.ExitCode = st.Code
		if st.Signal != 0 {
			rep.ExitCode, rep.Signal = 128+int(st.Signal), signalName(st.Signal)
		}
		if st.Signal != 0 || st.Code != 0 {
			break
		}
	}
	j.closeLog()
	end := now()
	rep.EndedAt = &end
	rep.Output, rep.OutputBytes = j.output.text()
	j.mu.Lock()
	rep.Cancelled, rep.TimedOut = j.cancelled, j.timedOut
	j.report, j.proc = rep, nil
	j.mu.Unlock()
}

// phase1 runs one phase to its end; a timeout stops it.
func (j *runningJob) phase1(e hostenv.Environment, name, script string, env []string, timeout <-chan time.Time) (hostenv.ExitStatus, error) {
	j.mu.Lock()
	if j.cancelled || j.timedOut {
		j.mu.Unlock()
		return hostenv.ExitStatus{Code: 255}, fmt.Errorf("the job was stopped before %s", name)
	}
	proc, err := e.Exec(context.Background(), hostenv.ExecSpec{Command: script, Env: env, Stdout: j.stdout(), Stderr: j.stderr()})
	if err == nil {
		j.phase, j.proc = name, proc
	}
	j.mu.Unlock()
	if err != nil {
		return hostenv.ExitStatus{}, err
	}
	exited := make(chan hostenv.ExitStatus, 1)
	go func() { exited <- proc.Wait() }()
	select {
	case st := <-exited:
		return st, nil
	case <-timeout:
		j.mu.Lock()
		j.timedOut = true
		j.mu.Unlock()
		j.stop(stopGrace)
		return <-exited, nil
	}
}

// stopGrace is how long a timed-out job has between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// stop sends SIGTERM to the job's process group and SIGKILL after grace
// if it still runs. It reports whether the job had not ended: one whose
// next phase had not started yet does not start it (phase1 checks
// cancelled and timedOut under the lock it starts processes under).
func (j *runningJob) stop(grace time.Duration) bool {
	select {
	case <-j.done:
		return false
	default:
	}
	j.mu.Lock()
	proc, stopPrepare := j.proc, j.stopPrepare
	j.mu.Unlock()
	if stopPrepare != nil {
		stopPrepare() // a pull in progress ends; no container is made
	}
	if proc == nil || !proc.Signal(syscall.SIGTERM) {
		return true
	}
	go func() {
		select {
		case <-j.done:
		case <-time.After(grace):
			proc.Signal(syscall.SIGKILL)
		}
	}()
	return true
}

// wait reports the job's end, or that it still runs once wait passed or
// ctx ended.
func (j *runningJob) wait(ctx context.Context, wait time.Duration) hostproto.JobReport {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-j.done:
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.report
	case <-t.C:
	case <-ctx.Done():
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	started := j.started
	return hostproto.JobReport{JobID: j.id, Phase: j.phase, StartedAt: &started}
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// outputTail is how much of a job's output (stdout and stderr, in the
// order written) its final report carries: the end of it.
const outputTail = 16 << 10

// tailBuffer keeps the last outputTail bytes written to it.
type tailBuffer struct {
	// mu protects the following.
	mu    sync.Mutex
	buf   []byte
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - outputTail; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// text is the kept tail as valid UTF-8 text without NUL bytes, and the
// number of bytes written in all.
func (b *tailBuffer) text() (string, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.ToValidUTF8(string(b.buf), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), b.total
}
