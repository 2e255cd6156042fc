package job

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdRun(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    RunOptions
		wantErr string
	}{
		{name: "file", args: []string{"-f", "job.yaml"}, want: RunOptions{File: "job.yaml"}},
		{name: "stdin, detached, keyed", args: []string{"-f", "-", "--detach", "--idempotency-key", "k1"},
			want: RunOptions{File: "-", Detach: true, IdempotencyKey: "k1"}},
		{name: "queued", args: []string{"-f", "job.yaml", "--queue"}, want: RunOptions{File: "job.yaml", Queue: true}},
		{name: "queued and detached", args: []string{"-f", "job.yaml", "--queue", "--detach"},
			want: RunOptions{File: "job.yaml", Queue: true, Detach: true}},
		{name: "no file", args: nil, wantErr: "-f/--file is required"},
		{name: "an argument", args: []string{"-f", "x", "extra"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *RunOptions
			cmd := NewCmdRun(cmdtest.Factory(ios), func(_ context.Context, o *RunOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.File != tt.want.File || got.Detach != tt.want.Detach || got.IdempotencyKey != tt.want.IdempotencyKey ||
				got.Queue != tt.want.Queue {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestReadJob(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.yaml", "name: t\nresources: {allocation: a-1}\nenv: {B: 2, A: x}\nsetup: make\nrun: exit 7\ntimeout: 1500ms\nrelease: keep\nretries: 2\n")
	ios, _, _, _ := cmdtest.Streams(false)
	got, sku, err := readJob(ios, ok)
	if err != nil || !reflect.DeepEqual(sku, api.AllocCreateRequest{}) {
		t.Fatal(err, sku)
	}
	want := api.JobCreateRequest{AllocationID: "a-1", Name: "t", Setup: "make", Run: "exit 7", TimeoutSeconds: 2, Release: "keep", Retries: 2,
		Env: map[string]string{"A": "x", "B": "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v; want %+v", got, want)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"unknown key", "resources: {allocation: a-1}\nrun: x\nrn: y\n", "line 3: rn: unknown key"},
		{"missing run", "resources: {allocation: a-1}\n", "run: required"},
		{"retries", "resources: {allocation: a-1}\nretries: 11\nrun: x\n", "retries: 11: want 0 to 10"},
	} {
		_, _, err := readJob(ios, write(tt.name+".yaml", tt.text))
		cmdtest.WantUsageError(t, err, tt.want)
	}
	// secret: values name project secrets: sent as names, never as values.
	got, _, err = readJob(ios, write("secret.yaml", "resources: {allocation: a-1}\nenv: {T: 'secret:hf-token', A: x}\nrun: x\n"))
	if err != nil || !reflect.DeepEqual(got.Secrets, map[string]string{"T": "hf-token"}) ||
		!reflect.DeepEqual(got.Env, map[string]string{"A": "x"}) {
		t.Errorf("secret: got %+v, %v; want Secrets T=hf-token and Env A=x", got, err)
	}
	_, _, err = readJob(ios, filepath.Join(dir, "missing.yaml"))
	cmdtest.WantUsageError(t, err, "read ")
	// Standard input.
	sin, in, _, _ := cmdtest.Streams(false)
	in.WriteString("resources: {allocation: a-2}\nrun: echo hello\n")
	if got, _, err := readJob(sin, "-"); err != nil || got.AllocationID != "a-2" || got.Run != "echo hello" {
		t.Errorf("stdin: got %+v, %v", got, err)
	}
	// An image is passed on as written: controld resolves it.
	if got, _, err := readJob(ios, write("image.yaml", "resources: {allocation: a-1}\nimage: tiny\nrun: x\n")); err != nil || got.Image != "tiny" {
		t.Errorf("image: got %+v, %v; want Image tiny", got, err)
	}
	// A SKU to rent: the job request names no allocation yet.
	got, sku, err = readJob(ios, write("sku.yaml", "resources: {sku: h100-baremetal, gpus: 8}\nrun: x\n"))
	if err != nil || got.AllocationID != "" || !reflect.DeepEqual(sku, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}) {
		t.Errorf("sku: got %+v %+v, %v", got, sku, err)
	}
}

func TestJobExit(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, tt := range []struct {
		name string
		j    api.Job
		want int
	}{
		{"succeeded", api.Job{State: api.JobSucceeded, ExitCode: code(0)}, 0},
		{"own exit 7", api.Job{State: api.JobFailed, ExitCode: code(7), Reason: "run exited with 7"}, 7},
		{"setup exit 3", api.Job{State: api.JobFailed, Phase: "setup", ExitCode: code(3)}, 3},
		{"lost", api.Job{State: api.JobLost, Reason: "hostd stopped"}, cmdutil.ExitJobPlatformFailure},
		{"timeout", api.Job{State: api.JobFailed, ExitCode: code(143), Signal: "SIGTERM", Reason: "timeout: ran longer than 1s"}, cmdutil.ExitJobPlatformFailure},
		{"timeout, exited 0 on SIGTERM", api.Job{State: api.JobFailed, ExitCode: code(0), Reason: "timeout: ran longer than 1s"}, cmdutil.ExitJobPlatformFailure},
		{"cancelled", api.Job{State: api.JobCancelled, ExitCode: code(143), Signal: "SIGTERM", Reason: "cancelled"}, 143},
		{"cancelled, exited 0", api.Job{State: api.JobCancelled, ExitCode: code(0), Reason: "cancelled"}, cmdutil.ExitError},
		{"cancelled before it started", api.Job{State: api.JobCancelled, Reason: "cancelled before it started"}, cmdutil.ExitError},
		{"workdir not on the node", api.Job{State: api.JobFailed, Phase: api.JobPhaseWorkdir, Reason: "workdir: ~/x is not a directory on the node"}, cmdutil.ExitJobPlatformFailure},
	} {
		err := jobExit(&tt.j)
		if got := cmdutil.ExitCodeOf(err); got != tt.want {
			t.Errorf("%s: exit %d; want %d", tt.name, got, tt.want)
		}
		if tt.want != 0 && !strings.Contains(err.Error(), tt.j.State) {
			t.Errorf("%s: message %q does not say the state", tt.name, err)
		}
	}
}
