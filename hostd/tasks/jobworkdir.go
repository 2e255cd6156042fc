package tasks

import (
	"fmt"
	"strings"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// A job with a workdir (docs/decisions/0027-workdir-upload.md) starts
// setup and run in it, relative to the renter's home. The environment
// starts commands in the home, on the node and in a slice's guest alike,
// so a `cd` by the user's own shell reaches it in both without hostd
// reading the renter's files.

// enterWorkdir checks, as phase JobPhaseWorkdir, that the job's workdir
// is a directory the renter can enter; when it is not, it fills rep with
// why and returns false. rep then has no StartedAt: nothing of the job
// ran, and the platform, not the job, failed it (exit 125 for `gpuaas
// run`).
func (j *runningJob) enterWorkdir(e hostenv.Environment, p hostproto.JobStartParams, timeout <-chan time.Time, rep *hostproto.JobReport) bool {
	st, err := j.phase1(e, api.JobPhaseWorkdir, "cd -- "+shellWord(p.Workdir), p.Env, timeout)
	if err == nil && st.Code == 0 && st.Signal == 0 {
		return true
	}
	rep.Phase, rep.ExitCode, rep.StartedAt = api.JobPhaseWorkdir, 255, nil
	rep.Reason = fmt.Sprintf("workdir: ~/%s is not a directory on the node: nothing ran (gpuaas run uploads it before the job starts)", p.Workdir)
	if strings.HasPrefix(p.Workdir, "/") {
		rep.Reason = fmt.Sprintf("workdir: %s is not a directory on the node: nothing ran", p.Workdir)
	}
	if err != nil {
		rep.Reason = fmt.Sprintf("workdir: cannot start: %v", err)
	}
	return false
}

// inWorkdir is script started in dir: the `cd` shares the script's
// first line, so the line numbers its errors name stay the user's.
func inWorkdir(dir, script string) string {
	if dir == "" {
		return script
	}
	return "cd -- " + shellWord(dir) + " || exit 125; " + script
}

// shellWord quotes s as one word for a POSIX shell.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
