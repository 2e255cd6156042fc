package job

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestRunRefusesABadWorkdirBeforeAnything: a workdir that does not exist,
// is a file, or is given over SSH is refused naming the field (exit 2)
// before a client is even asked for; a relative one is read from the
// job.yaml's directory.
func TestRunRefusesABadWorkdirBeforeAnything(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "proj", "train.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(name, workdir string) string {
		p := filepath.Join(dir, name)
		text := "resources: {allocation: a-1}\nworkdir: " + workdir + "\nrun: python3 train.py\n"
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noClient := func() (*api.Client, error) {
		t.Fatal("a client was asked for: the workdir was not checked first")
		return nil, nil
	}
	for _, tt := range []struct {
		name, file string
		local      bool
		want       string
	}{
		{"missing", spec("missing.yaml", "nope"), true, "workdir: " + filepath.Join(dir, "nope") + " does not exist"},
		{"a file", spec("file.yaml", "proj/train.py"), true, "workdir: " + filepath.Join(dir, "proj/train.py") + " is not a directory"},
		{"over SSH", spec("ssh.yaml", "proj"), false, "workdir: needs the gpuaas CLI on the machine"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			err := runRun(context.Background(), &RunOptions{IO: ios, Client: noClient, File: tt.file, LocalFiles: tt.local})
			cmdtest.WantUsageError(t, err, tt.want)
		})
	}
	// Relative to the job.yaml: proj is found from any current directory.
	ios, _, _, _ := cmdtest.Streams(false)
	up, err := scanWorkdir(&RunOptions{IO: ios, File: spec("ok.yaml", "proj"), LocalFiles: true}, "proj")
	if err != nil || up.plan.Root != filepath.Join(dir, "proj") || len(up.plan.Entries) != 1 {
		t.Fatalf("scan: %+v, %v; want proj with train.py", up, err)
	}
}

// TestUploadFailureIsAPlatformFailure: an upload the node refused ends
// the run with exit 125 and the node's reason.
func TestUploadFailureIsAPlatformFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, _, stderr := cmdtest.Streams(false)
	opts := &RunOptions{IO: ios, File: "-", LocalFiles: true,
		Upload: func(context.Context, *RunOptions, string, string, *upload) error {
			return errSentinel("upload damaged: a file's sha256 differs from the manifest")
		}}
	up, err := scanWorkdir(opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = up.send(context.Background(), opts, "a-1", "k")
	if cmdutil.ExitCodeOf(err) != cmdutil.ExitJobPlatformFailure || !strings.Contains(err.Error(), "sha256 differs") {
		t.Errorf("got %v (exit %d); want exit 125 with the node's reason", err, cmdutil.ExitCodeOf(err))
	}
	if !strings.Contains(stderr.String(), "uploading workdir "+dir+" to a-1: 1 files") {
		t.Errorf("stderr %q; want the upload's line", stderr)
	}
}

type errSentinel string

func (e errSentinel) Error() string { return string(e) }
