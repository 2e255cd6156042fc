package tasks

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// A job whose job.yaml names an image runs its phases inside one
// container of that image (docs/decisions/0052-jobs-in-images.md): the
// container is created when the job starts, as the renter (rootless
// podman, as apps: hostd/workload), kept alive by a shell waiting on its
// open stdin, and each phase (workdir check, setup, run) is a `podman
// exec` in it, so setup's changes to the container's files are there for
// run. The renter's home is bind-mounted at the same path and is the
// container's working directory, so a workdir (relative to the home)
// is the same path with or without an image. The container is removed
// when the job ends.

// jobImagePrepareTimeout bounds the pull, load and create of a job's
// container.
const jobImagePrepareTimeout = 30 * time.Minute

// jobImageRemoveTimeout bounds the removal of a job's container.
const jobImageRemoveTimeout = time.Minute

// jobContainerRE is what a job id must be to name a container.
var jobContainerRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// JobContainerName is the container a job with an image runs in.
func JobContainerName(jobID string) string { return "gpuaas-job-" + jobID }

// LabelJob names the job a container runs.
const LabelJob = "gpuaas.job"

// jobImageEnv is the allocation's environment with Exec running each
// command in the job's container. Everything else is the allocation's.
type jobImageEnv struct {
	hostenv.Environment
	env  *Env
	p    hostproto.JobStartParams
	name string
	// mu protects the following.
	mu       sync.Mutex
	created  bool
	recorded bool // jobimage_restart.go
}

// newJobImageEnv wraps e for a job with an image; prepare makes its
// container.
func newJobImageEnv(env *Env, e hostenv.Environment, p hostproto.JobStartParams) *jobImageEnv {
	return &jobImageEnv{Environment: e, env: env, p: p, name: JobContainerName(p.JobID)}
}

// prepare pulls the image into the node's cache (by digest, once per
// node), gives the user a subordinate id range, loads the image into the
// user's storage and creates the job's container with the allocation's
// GPUs (CDI, as apps).
func (ie *jobImageEnv) prepare(ctx context.Context) error {
	if _, err := workload.ParseRef(ie.p.Image); err != nil {
		return err
	}
	if !jobContainerRE.MatchString(ie.p.JobID) {
		return fmt.Errorf("job id %q cannot name a container", ie.p.JobID)
	}
	if workload.InGuest(ie.Environment) {
		// controld refuses these (controld/jobs/image.go); a guest's
		// limits and storage are the workload path's, not built for jobs.
		return errors.New("a job with an image does not run in a slice's guest")
	}
	pm, err := workload.Open(ie.Environment)
	if err != nil {
		return err
	}
	entry, _, err := ie.env.imageCache().Ensure(ctx, ie.p.Image)
	if err != nil {
		return fmt.Errorf("pull %s: %w", ie.p.Image, err)
	}
	if err := workloadSubIDs(ctx, ie.env, pm, ie.p.PosixUser); err != nil {
		return fmt.Errorf("subordinate ids: %w", err)
	}
	devices, err := workloadGPUs(ctx, ie.env, pm, ie.p.AllocationID, ie.p.GPUs)
	if err != nil {
		return fmt.Errorf("gpus: %w", err)
	}
	binds, err := jobVolumeBinds(ctx, ie.env, ie.p.PosixUser)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if w := ie.p.Workdir; strings.HasPrefix(w, "/") {
		w = path.Clean(w)
		binds = append(binds, workload.BindMount{Source: w, Target: w})
	}
	// Recorded first: a hostd that stops from here on finds it when it
	// starts again (jobimage_restart.go).
	if err := recordJobContainer(ie.env, jobContainerRecord{JobID: ie.p.JobID, AllocationID: ie.p.AllocationID,
		PosixUser: ie.p.PosixUser}); err != nil {
		return err
	}
	ie.mu.Lock()
	ie.recorded = true
	ie.mu.Unlock()
	// The container is made as an app's (hostd/workload decides podman's
	// flags: runtime, host network, the user's hard limits, CDI devices,
	// binds), with what a job needs: its init a shell on an open stdin,
	// `--replace` of one a previous attempt left (a retry after hostd
	// restarted), no log of its own, the home as its working directory.
	if _, err := pm.Start(ctx, workload.Spec{Name: ie.name, AllocationID: ie.p.AllocationID, Image: entry,
		Command: []string{"/bin/sh"}, Devices: devices, Mounts: binds, Labels: []string{LabelJob + "=" + ie.p.JobID},
		Interactive: true, Replace: true, NoLog: true, HomeWorkdir: true}); err != nil {
		return fmt.Errorf("create the job's container: %w", err)
	}
	ie.mu.Lock()
	ie.created = true
	ie.mu.Unlock()
	ie.env.Log.Info("job container created", "job", ie.p.JobID, "image", entry.Digest, "gpus", len(devices))
	return nil
}

// Exec runs spec.Command in the job's container by /bin/sh. The job's
// env reaches podman's own environment (as it reaches the job's process
// without an image) and is named on its command line by name only
// (`--env NAME`: podman takes the value from its environment), so no
// value is in `ps`, nor in the container's configuration (`podman
// inspect`): an exec session's env is its own.
func (ie *jobImageEnv) Exec(ctx context.Context, spec hostenv.ExecSpec) (hostenv.Process, error) {
	ie.mu.Lock()
	created := ie.created
	ie.mu.Unlock()
	if !created {
		return nil, errors.New("the job's container was not created")
	}
	args := []string{"exec"}
	for _, kv := range spec.Env {
		name, _, _ := strings.Cut(kv, "=")
		args = append(args, "--env", name)
	}
	args = append(args, ie.name, "/bin/sh", "-c", spec.Command)
	proc, err := ie.Environment.Exec(ctx, hostenv.ExecSpec{Command: "exec podman --runtime runc " + quoteAll(args),
		Env: spec.Env, Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr})
	if err != nil {
		return nil, err
	}
	return &jobImageProc{Process: proc, ie: ie}, nil
}

// Close removes the job's container (ending whatever still runs in it),
// then closes the allocation's environment.
func (ie *jobImageEnv) Close() error {
	ie.mu.Lock()
	created, recorded := ie.created, ie.recorded
	ie.mu.Unlock()
	if created || recorded {
		ctx, cancel := context.WithTimeout(context.Background(), jobImageRemoveTimeout)
		r, err := workload.Podman{Env: ie.Environment}.Run(ctx, nil, "rm", "--force", "--ignore", "--time", "0", ie.name)
		cancel()
		if err == nil {
			err = r.Err("remove " + ie.name)
		}
		if err != nil {
			ie.env.Log.Warn("job container not removed; the allocation's release or hostd's next start removes it", "job", ie.p.JobID, "err", err)
		} else {
			forgetJobContainer(ie.env, ie.p.JobID)
		}
	}
	return ie.Environment.Close()
}

// quoteAll quotes each argument for the user's POSIX shell.
func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellWord(a)
	}
	return strings.Join(q, " ")
}

// enterImage prepares a job's container, as phase JobPhaseImage; when it
// cannot, it fills rep with why and returns false: nothing of the job
// ran, and the platform failed it (exit 125 for `gpuaas run`), as for a
// missing workdir. A job stopped meanwhile (job.stop, jobsup.go) ends its
// preparation through the context: the pull or load is abandoned, no
// phase runs, and the job is reported cancelled with nothing run.
func (j *runningJob) enterImage(ie *jobImageEnv, rep *hostproto.JobReport) bool {
	ctx, cancel := context.WithTimeout(context.Background(), jobImagePrepareTimeout)
	defer cancel()
	j.mu.Lock()
	j.phase = api.JobPhaseImage
	stopped := j.cancelled
	j.stopPrepare = cancel
	j.mu.Unlock()
	var err error
	if !stopped {
		err = ie.prepare(ctx)
	}
	j.mu.Lock()
	j.stopPrepare = nil
	stopped = j.cancelled
	j.mu.Unlock()
	if err == nil && !stopped {
		return true
	}
	rep.Phase, rep.ExitCode, rep.StartedAt = api.JobPhaseImage, 255, nil
	if stopped {
		rep.Reason = "cancelled while its image was prepared: nothing ran"
		return false
	}
	rep.Reason = fmt.Sprintf("image: %v: nothing ran", err)
	return false
}
