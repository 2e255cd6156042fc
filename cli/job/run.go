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
}

// NewCmdRun builds `gpuaas run`; runF replaces runRun in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "run -f job.yaml",
		Short: "Run a job (job.yaml) on an allocation and exit with its exit code",
		Long: `Run a job: the setup and run scripts of job.yaml (docs/jobs.md; "-f -" reads
it from standard input) run on the allocation it names, as your user there,
supervised by the node, so the job goes on if this command is interrupted.
The job's id is printed on standard error; ` + "`gpuaas job wait ID`" + ` follows it again.

Without --detach, wait for the job to end and exit with its own exit code.
When the platform ended it (lost, its timeout), exit 125
(job_platform_failure) with the reason. With --detach, print the job id on
standard output and return at once.

job.yaml is checked before anything is sent: an unknown key, a missing
run, a bad value is refused naming the field and its line (exit 2).
Not built yet, and refused: resources.sku (rent with ` + "`gpuaas alloc create --wait`" + `
and name the allocation), image, workdir, secret: values, retries.
The job's output is not streamed yet: once it ended, its last 16 KiB are
printed on standard output.`,
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
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Key that makes retries safe (default: random)")
	return cmd
}

func runRun(ctx context.Context, opts *RunOptions) error {
	req, err := readJob(opts.IO, opts.File)
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = api.NewIdempotencyKey()
	}
	j, err := client.JobCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil {
		return err
	}
	if opts.Detach {
		_, err := fmt.Fprintln(opts.IO.Out, j.ID)
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "job %s started on %s; `gpuaas job wait %s` follows it again\n", j.ID, j.AllocationID, j.ID)
	_, err = waitJob(ctx, opts.IO, client, j.ID, 0)
	return err
}

// readJob reads and checks job.yaml and makes the job.create request,
// refusing what is not built yet by its field.
func readJob(ios *cmdutil.IOStreams, file string) (api.JobCreateRequest, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(ios.In, jobspec.MaxFileBytes+1))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return api.JobCreateRequest{}, cmdutil.FlagErrorf("read %s: %v", file, errors.Unwrap(err))
	}
	s, err := jobspec.Parse(b)
	if err != nil {
		return api.JobCreateRequest{}, cmdutil.FlagErrorWrap(err)
	}
	notYet := func(field, why string) error {
		return cmdutil.FlagErrorWrap(&jobspec.Error{Field: field, Reason: "not supported yet: " + why})
	}
	switch {
	case s.Resources.Allocation == "":
		return api.JobCreateRequest{}, notYet("resources.sku", "rent with `gpuaas alloc create --wait` and name it in resources.allocation")
	case s.Image != "":
		return api.JobCreateRequest{}, notYet("image", "jobs run in the allocation's own environment")
	case s.Workdir != "":
		return api.JobCreateRequest{}, notYet("workdir", "copy files with scp or sftp before the job")
	case s.Retries != 0:
		return api.JobCreateRequest{}, notYet("retries", "a job the platform lost is not started again")
	case len(s.SecretNames()) > 0:
		return api.JobCreateRequest{}, notYet("env", "secret: values need project secrets")
	}
	req := api.JobCreateRequest{AllocationID: s.Resources.Allocation, Name: s.Name, Setup: s.Setup, Run: s.Run,
		TimeoutSeconds: int64((s.Timeout + time.Second - 1) / time.Second), Release: s.Release}
	if len(s.Env) > 0 {
		req.Env = map[string]string{}
		for _, v := range s.Env {
			req.Env[v.Name] = v.Value
		}
	}
	return req, nil
}
