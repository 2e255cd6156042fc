package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Spec is a workload to run.
type Spec struct {
	WorkloadID, AllocationID string
	Image                    Entry
	// Command replaces the image's entrypoint and command when not empty.
	Command []string
	Env     []string // NAME=value
	// Devices are CDI device names (KIND=NAME) the container gets: its
	// allocation's GPUs (cdi.go).
	Devices []string
	// ShmBytes is /dev/shm's size (0: podman's default, 64 MiB).
	ShmBytes int64
	// Mounts are directories of the node bound into the container: the
	// allocation's volumes (mounts.go).
	Mounts []BindMount

	// What a job's container needs (hostd/tasks/jobimage.go,
	// docs/decisions/0052-jobs-in-images.md); an app's leaves them unset.

	// Name is the container's name; "" is ContainerName(WorkloadID).
	Name string
	// Labels are more labels, NAME=value (a job's: its id).
	Labels []string
	// Interactive keeps the container's stdin open: a job's init, a
	// shell, waits on it while its phases run as execs.
	Interactive bool
	// Replace ends and replaces a container of the same name (a job's
	// retry after hostd restarted) instead of taking it for this one.
	Replace bool
	// NoLog: the container keeps no log of its own (a job's output is
	// its execs', read by hostd).
	NoLog bool
	// HomeWorkdir binds the user's home at the same path and makes it the
	// working directory and HOME.
	HomeWorkdir bool
}

// labelRE is what a Spec's Labels must be: a dotted name, a value of
// one line.
var labelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*=[^\n\x00]*$`)

// containerNameRE is what a Spec's Name must be.
var containerNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

var (
	workloadIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	envRE        = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// CheckID refuses a workload id that cannot name a container.
func CheckID(id string) error {
	if !workloadIDRE.MatchString(id) {
		return api.Errorf(api.CodeInvalidArgument, "workload id %q: want [a-z0-9][a-z0-9-]{0,62}", id)
	}
	return nil
}

// ContainerName is the container of workload id.
func ContainerName(id string) string { return "gpuaas-" + id }

// logMaxSize bounds a container's log file on the node (podman's
// k8s-file driver rotates it).
const logMaxSize = "8mb"

// Start loads the image into the user's storage unless it has it, and
// runs the workload's container unless it exists already (a start
// delivered again is not a second container).
func (p Podman) Start(ctx context.Context, s Spec) (loaded bool, err error) {
	name := s.Name
	switch {
	case name == "":
		if err := CheckID(s.WorkloadID); err != nil {
			return false, err
		}
		name = ContainerName(s.WorkloadID)
	case !containerNameRE.MatchString(name):
		return false, api.Errorf(api.CodeInvalidArgument, "container name %q: want [A-Za-z0-9][A-Za-z0-9_.-]{0,127}", name)
	}
	for _, e := range s.Env {
		if !envRE.MatchString(e) {
			return false, api.Errorf(api.CodeInvalidArgument, "env %q: want NAME=value", e)
		}
	}
	for _, l := range s.Labels {
		if !labelRE.MatchString(l) {
			return false, api.Errorf(api.CodeInvalidArgument, "label %q: want name=value", l)
		}
	}
	id := strings.TrimPrefix(s.Image.Config, "sha256:")
	// One shell for the limits and whether the user has the image: each
	// podman started costs (BenchmarkAppRunCached).
	lim, err := p.prepare(ctx, id)
	if err != nil {
		return false, err
	}
	if InGuest(p.Env) {
		if lim, err = p.guestLimits(ctx, lim); err != nil { // guest.go
			return false, err
		}
	}
	if !lim.hasImage {
		if err := p.Load(ctx, s.Image); err != nil {
			return false, err
		}
		loaded = true
	}
	nofile, nproc := lim.nofile, lim.nproc
	args := []string{"run", "--detach", "--name", name, "--label", LabelAllocation + "=" + s.AllocationID}
	if s.WorkloadID != "" {
		args = append(args, "--label", LabelWorkload+"="+s.WorkloadID)
	}
	for _, l := range s.Labels {
		args = append(args, "--label", l)
	}
	args = append(args, "--network", "host",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile, nofile), "--ulimit", fmt.Sprintf("nproc=%d:%d", nproc, nproc))
	if s.NoLog {
		args = append(args, "--log-driver", "none")
	} else {
		args = append(args, "--log-driver", "k8s-file", "--log-opt", "max-size="+logMaxSize)
	}
	if s.Interactive {
		args = append(args, "--interactive")
	}
	if s.Replace {
		args = append(args, "--replace")
	}
	if s.HomeWorkdir {
		home := lim.home
		if !filepath.IsAbs(home) || filepath.Clean(home) != home || strings.ContainsAny(home, ":,\n") {
			return loaded, fmt.Errorf("run %s: the user's home %q cannot be bound", name, home)
		}
		args = append(args, "--volume", home+":"+home, "--workdir", home, "--env", "HOME="+home)
	}
	for _, e := range s.Env {
		args = append(args, "--env", e)
	}
	for _, d := range s.Devices {
		args = append(args, "--device", d)
	}
	if s.ShmBytes > 0 {
		args = append(args, "--shm-size", strconv.FormatInt(s.ShmBytes, 10)+"b")
	}
	margs, err := mountArgs(s.Mounts) // mounts.go
	if err != nil {
		return false, err
	}
	args = append(args, margs...)
	var cmd []string
	if len(s.Command) > 0 {
		ep, _ := json.Marshal(s.Command[:1])
		args = append(args, "--entrypoint", string(ep))
		cmd = s.Command[1:]
	}
	args = append(append(args, id), cmd...)
	r, err := p.Run(ctx, nil, args...)
	if err != nil {
		return loaded, err
	}
	if r.Code != 0 && strings.Contains(r.Stderr, "is already in use") {
		// Delivered again: the container is there (a start is not a
		// second container).
		return loaded, nil
	}
	if err := r.Err("run " + name); err != nil {
		// A container podman created but could not start is removed, so
		// that a retry starts afresh.
		_, _ = p.Run(context.WithoutCancel(ctx), nil, "rm", "--force", "--ignore", name)
		return loaded, err
	}
	return loaded, nil
}

// Status reports the workload's container: its state, exit code and last
// lines lines of its log (none when lines is negative; 0 is 20).
func (p Podman) Status(ctx context.Context, workloadID string, lines int) (hostproto.WorkloadReport, error) {
	if err := CheckID(workloadID); err != nil {
		return hostproto.WorkloadReport{}, err
	}
	name := ContainerName(workloadID)
	rep := hostproto.WorkloadReport{WorkloadID: workloadID, Container: name, State: api.ContainerMissing}
	c, found, err := p.Inspect(ctx, name)
	if err != nil || !found {
		return rep, err
	}
	rep.ImageConfig = "sha256:" + strings.TrimPrefix(c.Image, "sha256:")
	switch c.State.Status {
	case "running", "paused", "stopping":
		rep.State = api.ContainerRunning
	case "exited", "stopped":
		rep.State = api.ContainerExited
		rep.ExitCode = c.State.ExitCode
	default: // created, configured, initialized
		rep.State = api.ContainerCreated
	}
	rep.OOMKilled = c.State.OOMKilled
	if t := c.State.StartedAt; !t.IsZero() {
		rep.StartedAt = &t
	}
	if t := c.State.FinishedAt; !t.IsZero() && rep.State == api.ContainerExited {
		rep.FinishedAt = &t
	}
	if lines < 0 {
		return rep, nil
	}
	if lines == 0 {
		lines = 20
	}
	rep.LastLines, err = p.LastLines(ctx, name, lines)
	return rep, err
}

// Stop sends SIGTERM to the container's main process and SIGKILL after
// grace (podman stop); remove also removes the container. A container
// that is not there is not an error.
func (p Podman) Stop(ctx context.Context, workloadID string, grace time.Duration, remove bool) error {
	if err := CheckID(workloadID); err != nil {
		return err
	}
	name := ContainerName(workloadID)
	secs := strconv.Itoa(int((max(grace, 0) + time.Second - 1) / time.Second))
	r, err := p.Run(ctx, nil, "stop", "--ignore", "--time", secs, name)
	if err != nil {
		return err
	}
	if err := r.Err("stop " + workloadID); err != nil {
		return err
	}
	if !remove {
		return nil
	}
	r, err = p.Run(ctx, nil, "rm", "--force", "--ignore", name)
	if err != nil {
		return err
	}
	return r.Err("remove " + workloadID)
}

// RemoveImage removes image id (an image id) from the user's storage,
// with every name it has there (podman removes an image by id whatever
// tags the user added); an image that is not there is no error. An image
// that a container of the user still uses stays (inUse true): --force
// would remove that container too.
func (p Podman) RemoveImage(ctx context.Context, id string) (inUse bool, err error) {
	r, err := p.Run(ctx, nil, "rmi", "--ignore", id)
	if err != nil {
		return false, err
	}
	if r.Code != 0 && strings.Contains(r.Stderr, "in use") {
		return true, nil
	}
	return false, r.Err("remove image " + id)
}

// RemoveContainers stops and removes every container of the user, each
// with grace to end after SIGTERM, at release.
func (p Podman) RemoveContainers(ctx context.Context, grace time.Duration) error {
	secs := strconv.Itoa(int((max(grace, 0) + time.Second - 1) / time.Second))
	r, err := p.Run(ctx, nil, "rm", "--all", "--force", "--time", secs)
	if err != nil {
		return err
	}
	return r.Err("remove containers")
}

// ResetStorage removes all of the user's podman storage (images,
// containers, volumes: `podman system reset`), at release: files of its
// containers can belong to its subordinate ids, which deleting the user
// would not find. Nothing else of the user's may run meanwhile: another
// podman (a log follower, a status poll, the rootless pause process)
// creates files under the directories the reset unlinks, and the reset
// fails with "directory not empty" (ErrStorageBusy).
func (p Podman) ResetStorage(ctx context.Context) error {
	r, err := p.Run(ctx, nil, "system", "reset", "--force")
	if err != nil {
		return err
	}
	if err := r.Err("reset storage"); err != nil {
		if strings.Contains(err.Error(), "directory not empty") {
			return fmt.Errorf("%w: %w", ErrStorageBusy, err)
		}
		return err
	}
	return nil
}

// ErrStorageBusy is a storage reset that found files created while it
// ran: another process of the user's was using its podman storage.
var ErrStorageBusy = errors.New("podman storage in use")
