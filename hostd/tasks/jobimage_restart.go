package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/workload"
)

// A job's container outlives the hostd that made it: podman's conmon, not
// hostd, is its processes' parent. A restarted hostd knows none of the
// jobs before it (jobsup.go) and cannot re-attach one safely (its phase's
// exec session, exit code and log position were in the old hostd's
// memory), so on start it stops them: every job container of the
// allocations its record names is removed, and the job, reported unknown,
// is lost with that said, and retried when its retries allow
// (docs/decisions/0062-job-containers-across-restarts.md). Nothing runs
// that nobody is responsible for.

// jobContainersDir holds one record per job container hostd made and has
// not removed yet: which allocation user's podman holds it.
const jobContainersDir = "job-containers"

// jobContainerRecord is what hostd keeps of a job container.
type jobContainerRecord struct {
	JobID        string `json:"job_id"`
	AllocationID string `json:"allocation_id"`
	PosixUser    string `json:"posix_user"`
}

func jobRecordPath(env *Env, jobID string) string {
	return filepath.Join(env.StateDir, jobContainersDir, jobID+".json")
}

// recordJobContainer notes, before the container is made, that it will
// be: a hostd that stops before removing it finds it at its next start.
func recordJobContainer(env *Env, r jobContainerRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	p := jobRecordPath(env, r.JobID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("record job container: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("record job container: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("record job container: %w", err)
	}
	return nil
}

// forgetJobContainer drops the record of a job container removed.
func forgetJobContainer(env *Env, jobID string) {
	if err := os.Remove(jobRecordPath(env, jobID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		env.Log.Warn("job container record not removed", "job", jobID, "err", err)
	}
}

// jobReapTimeout bounds the removal of one user's job containers when
// hostd starts.
const jobReapTimeout = 2 * time.Minute

// StopJobContainers removes, when hostd starts and before it takes tasks,
// every job container a previous run of hostd left (its records: one per
// container made and not removed), in the podman of each allocation user
// they name, found by its job label; each job is then reported unknown
// with the reason that its container was stopped. It returns how many
// containers it removed.
func StopJobContainers(ctx context.Context, env *Env) int {
	if env.Envs == nil {
		return 0 // this hostd runs no jobs
	}
	dir := filepath.Join(env.StateDir, jobContainersDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			env.Log.Warn("job containers: read records", "err", err)
		}
		return 0
	}
	users := map[string]jobContainerRecord{} // one record per user: its podman holds all its job containers
	type recorded struct{ file, jobID, user string }
	var jobs []recorded
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var r jobContainerRecord
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err == nil && (checkAllocationID(r.AllocationID) != nil || host.CheckUserName(r.PosixUser) != nil) {
			err = errors.New("bad allocation or user")
		}
		if err != nil {
			env.Log.Warn("job containers: unreadable record dropped", "file", e.Name(), "err", err)
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		users[r.PosixUser] = r
		jobs = append(jobs, recorded{file: e.Name(), jobID: r.JobID, user: r.PosixUser})
	}
	removed := 0
	failed := map[string]bool{} // users whose containers may still run
	for _, r := range users {
		n, err := stopUserJobContainers(ctx, env, r)
		removed += n
		if err == nil {
			continue
		}
		// A user that is gone (its allocation released) took its
		// podman storage, and the containers, with it; one that is
		// there keeps its records, so that the next start tries again
		// (docs/decisions/0062-job-images-start-cancel-restart.md).
		if _, lerr := lookupPosix(r.PosixUser); lerr == nil {
			failed[r.PosixUser] = true
		}
		env.Log.Warn("job containers: not stopped", "allocation", r.AllocationID, "err", err, "kept", failed[r.PosixUser])
	}
	sup := supervisorFor(env.Envs)
	for _, j := range jobs {
		if failed[j.user] {
			continue
		}
		sup.markStoppedAtStart(j.jobID)
		// By its file's name: what the record says may differ.
		if err := os.Remove(filepath.Join(dir, j.file)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			env.Log.Warn("job container record not removed", "job", j.jobID, "err", err)
		}
	}
	return removed
}

// stopUserJobContainers removes every job container in r's user's podman.
func stopUserJobContainers(ctx context.Context, env *Env, r jobContainerRecord) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, jobReapTimeout)
	defer cancel()
	e, err := env.Envs.Open(ctx, hostenv.Alloc{ID: r.AllocationID, PosixUser: r.PosixUser})
	if err != nil {
		return 0, err
	}
	defer e.Close()
	pm := workload.Podman{Env: e}
	res, err := pm.Run(ctx, nil, "ps", "--all", "--filter", "label="+LabelJob, "--format", "{{.Names}}")
	if err == nil {
		err = res.Err("list job containers")
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range strings.Fields(res.Stdout) {
		if !strings.HasPrefix(name, JobContainerName("")) {
			continue
		}
		rm, err := pm.Run(ctx, nil, "rm", "--force", "--ignore", "--time", "0", name)
		if err == nil {
			err = rm.Err("remove " + name)
		}
		if err != nil {
			return n, err
		}
		n++
		env.Log.Info("job container left by a previous hostd stopped", "container", name, "allocation", r.AllocationID)
	}
	return n, nil
}
