package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/jobspec"
)

// RunOptions are the inputs of `gpuaas run`.
type RunOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)

	File           string
	Detach         bool
	IdempotencyKey string
	// Queue waits in line for capacity when resources.sku cannot be
	// placed now (runqueue.go).
	Queue bool

	// SSH reaches the allocation to upload a workdir (workdir.go).
	SSH sshconfig.Env
	// LocalFiles is set when the CLI runs on the user's machine, not
	// served over SSH by the gateway: only then is there a workdir to
	// upload.
	LocalFiles bool
	// Upload sends a workdir's stream to the allocation (sshUpload).
	Upload func(ctx context.Context, opts *RunOptions, allocID, script string, u *upload) error
}

// NewCmdRun builds `gpuaas run`; runF replaces runRun in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IOStreams, Client: f.Client,
		SSH: sshconfig.EnvOf(f), LocalFiles: f.Env == nil, Upload: sshUpload} // f.Env is set only over SSH
	cmd := &cobra.Command{
		Use:   "run -f job.yaml",
		Short: "Run a job (job.yaml) on an allocation and exit with its exit code",
		Long: `Run a job: the setup and run scripts of job.yaml (docs/jobs.md; "-f -" reads
it from standard input) run on the allocation it names, as your user there,
supervised by the node, so the job goes on if this command is interrupted.
The job's id is printed on standard error; ` + "`gpuaas job wait ID`" + ` follows it again.

Without --detach, print the job's output as it runs (its standard output
here on standard output, its standard error on standard error; see
` + "`gpuaas job logs`" + `), then exit with its own exit code.
When the platform ended it (lost, its timeout), exit 125
(job_platform_failure) with the reason. With --detach, print the job id on
standard output and return at once.

job.yaml is checked before anything is sent: an unknown key, a missing
run, a bad value is refused naming the field and its line (exit 2).
With resources.sku, an allocation of that SKU is rented first: its price
is printed, and it is created (with a key derived from --idempotency-key,
so a retry reuses it) and waited for; release: on-exit (the default)
releases it when the job ends. resources.allocation runs on one you have.
An env value secret:NAME is the project secret NAME (` + "`gpuaas secret set`" + `),
delivered to the job's node only: a missing one is refused before any
allocation is rented.
With workdir (relative to job.yaml), the directory is uploaded to the
allocation over SSH (as ` + "`gpuaas ssh`" + `) once it is active, without what
its .gitignore and .gpuaasignore files ignore (.git is never sent), and
checked file by file (sha256) there; setup and run start in it. An upload
that fails exits 125 before the job starts.
With --queue and resources.sku, a request that cannot be placed now waits
in line (as ` + "`gpuaas alloc create --queue`" + `) instead of failing with
no_capacity (exit 9): the price line is printed first, then the place in
line whenever it changes, and the job goes on as above once the allocation
is active. Interrupting the wait (Ctrl-C) releases the request: it leaves
the line and nothing is charged. With --queue --detach, run returns at
once: the job is created queued on the allocation request (its id on
standard output, its place in line on standard error) and starts by
itself once the allocation is placed and active; ` + "`gpuaas job list`" + ` shows
its place, ` + "`gpuaas job wait`" + ` follows it, ` + "`gpuaas job cancel`" + ` takes it out of
the line (the allocation is released, nothing is charged). A workdir
cannot be queued detached (it is uploaded from here once the allocation
is active, and nobody is here then): run attached, or fetch the files in
setup. --queue cannot be used with resources.allocation.
A job with retries: N that the platform loses (hostd restarted and could
not re-attach it, or its node stopped answering) is started again on its
allocation, at most N times; run and job wait follow every attempt and
exit with the last one's code, and its log goes on with a line
"--- attempt N (reason) ---". Never after the job's own exit, a timeout
or a cancel.
A job.yaml's image (a catalog name or id, or REPO@sha256:… of a catalog
image) runs setup and run in a container of that image on a bare-metal
allocation, as the renter, with the allocation's GPUs and the home (and
so the workdir) at the same path; the image must be verified and
promoted, and is checked before anything is rented (docs/jobs.md
"Images").
volumes: [NAME[:/path], ...] mounts project volumes as alloc create --volume
does: with resources.sku the allocation is created with them (on their
node); with resources.allocation each must be attached to it at that path,
else the run is refused naming it. --queue cannot be used with volumes.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.File == "" {
				return cmdutil.FlagErrorf("-f/--file is required: the job.yaml to run (- for standard input)")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "The job.yaml to run (- reads standard input)")
	cmd.Flags().BoolVarP(&opts.Detach, "detach", "d", false, "Print the job id and return without waiting")
	cmd.Flags().BoolVar(&opts.Queue, "queue", false, "With resources.sku: wait in line for capacity instead of failing")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Key that makes retries safe (default: random)")
	return cmd
}

func runRun(ctx context.Context, opts *RunOptions) error {
	req, sku, err := readJob(opts.IO, opts.File)
	if err != nil {
		return err
	}
	if opts.Queue {
		if sku.SKU == "" {
			return cmdutil.FlagErrorWrap(&jobspec.Error{Field: "resources", Reason: "--queue needs resources.sku: an allocation named by resources.allocation is not waited for"})
		}
		sku.Queue = true
	}
	if opts.Queue && opts.Detach && req.Workdir != "" {
		return cmdutil.FlagErrorWrap(&jobspec.Error{Field: "workdir", Reason: "cannot be used with --queue --detach: " +
			"the directory is uploaded from this machine once the allocation is active, and nothing is here to upload it then; " +
			"run with --queue without --detach (the upload follows the placement), or fetch the files in setup"})
	}
	up, err := scanWorkdir(opts, req.Workdir) // refused before anything is created or charged
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if err := checkJobVolumes(ctx, client, req.AllocationID, sku.Volumes, opts.Queue); err != nil {
		return err // volumes.go: before anything is created or started
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = api.NewIdempotencyKey()
	}
	rented := ""
	if req.AllocationID == "" {
		if err := checkSecretsExist(ctx, client, req.Secrets); err != nil {
			return err
		}
		if err := checkImageUsable(ctx, client, req.Image); err != nil {
			return err
		}
		if opts.Queue && opts.Detach {
			return runQueuedDetached(ctx, opts.IO, client, req, sku, key)
		}
		if req.AllocationID, err = rent(ctx, opts.IO, client, sku, key); err != nil {
			return err
		}
		rented = req.AllocationID
	}
	if up != nil {
		req.Workdir, err = up.send(ctx, opts, req.AllocationID, key)
	}
	var j *api.Job
	if err == nil {
		j, err = client.JobCreate(ctx, req, api.WithIdempotencyKey(key))
	}
	if err != nil {
		if rented != "" {
			// The allocation was for this job only: give it back.
			if _, rerr := client.AllocRelease(ctx, api.AllocReleaseRequest{ID: rented}); rerr == nil {
				fmt.Fprintf(opts.IO.ErrOut, "allocation %s released: the job could not be started\n", rented)
			}
		}
		return err
	}
	if opts.Detach {
		_, err := fmt.Fprintln(opts.IO.Out, j.ID)
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "job %s started on %s; `gpuaas job wait %s` follows it again\n", j.ID, j.AllocationID, j.ID)
	return streamJob(ctx, opts.IO, client, j.ID)
}

// readJob reads and checks job.yaml and makes the job.create request
// (without an allocation when resources names a SKU to rent: sku),
// refusing what is not built yet by its field.
func readJob(ios *cmdutil.IOStreams, file string) (req api.JobCreateRequest, sku api.AllocCreateRequest, err error) {
	var b []byte
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(ios.In, jobspec.MaxFileBytes+1))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return req, sku, cmdutil.FlagErrorf("read %s: %v", file, errors.Unwrap(err))
	}
	s, err := jobspec.Parse(b)
	if err != nil {
		return req, sku, cmdutil.FlagErrorWrap(err)
	}
	if s.Resources.SKU != "" {
		sku = api.AllocCreateRequest{SKU: s.Resources.SKU, GPUs: s.Resources.GPUs}
	}
	sku.Volumes = s.Volumes // attached at create with resources.sku, checked with resources.allocation (volumes.go)
	req = api.JobCreateRequest{AllocationID: s.Resources.Allocation, Name: s.Name, Setup: s.Setup, Run: s.Run,
		TimeoutSeconds: int64((s.Timeout + time.Second - 1) / time.Second), Release: s.Release,
		Workdir: s.Workdir, Retries: s.Retries, Image: s.Image} // the local directory until runRun uploads it (workdir.go)
	if len(s.Env) > 0 {
		req.Env = map[string]string{}
		for _, v := range s.Env {
			if v.Secret != "" {
				if req.Secrets == nil {
					req.Secrets = map[string]string{}
				}
				req.Secrets[v.Name] = v.Secret
				continue
			}
			req.Env[v.Name] = v.Value
		}
	}
	return req, sku, nil
}
