package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/internal/jobspec"
	"github.com/gpuaas/gpuaas/internal/workdir"
)

// upload is a job.yaml's workdir, scanned and hashed before anything is
// created or charged, then sent to the allocation over SSH as the renter
// (docs/decisions/0027-workdir-upload.md): the bytes never pass controld
// or the bus.
type upload struct {
	plan     *workdir.Plan
	manifest []byte
}

// scanWorkdir reads a job.yaml's workdir: dir relative to the job.yaml's
// directory (the current one for "-f -"), "~/" the local home. A workdir
// that does not exist, is not a directory or is over the limits is
// refused naming the field (exit 2); nil when the spec has none.
func scanWorkdir(opts *RunOptions, dir string) (*upload, error) {
	if dir == "" {
		return nil, nil
	}
	refuse := func(reason string) error {
		return cmdutil.FlagErrorWrap(&jobspec.Error{Field: "workdir", Reason: reason})
	}
	if !opts.LocalFiles {
		return nil, refuse("needs the gpuaas CLI on the machine that has the directory: over SSH there is none to upload")
	}
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, refuse(err.Error())
		}
		dir = filepath.Join(home, rest)
	} else if !filepath.IsAbs(dir) && opts.File != "-" {
		dir = filepath.Join(filepath.Dir(opts.File), dir)
	}
	plan, err := workdir.Scan(dir)
	if err != nil {
		return nil, refuse(err.Error())
	}
	manifest, err := plan.Manifest()
	if err != nil {
		return nil, refuse(err.Error())
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "warning: workdir: %s\n", w)
	}
	return &upload{plan: plan, manifest: manifest}, nil
}

// send uploads the workdir to allocID and returns its directory there,
// for job.create. Its name comes from the run's idempotency key and the
// manifest: a retried run with the same files reuses the copy there. A
// failed upload (the stream cut, a file's sha256 not matching on the
// node, ssh failing) ends the run with ExitJobPlatformFailure and the
// reason, before the job is created.
func (u *upload) send(ctx context.Context, opts *RunOptions, allocID, key string) (string, error) {
	name := workdir.UploadName(key, u.manifest)
	script, err := workdir.RemoteScript(name)
	if err != nil {
		return "", err
	}
	files := 0
	for _, e := range u.plan.Entries {
		if e.Kind == workdir.KindFile {
			files++
		}
	}
	fmt.Fprintf(opts.IO.ErrOut, "uploading workdir %s to %s: %d files, %s (%d ignored)\n",
		u.plan.Root, allocID, files, formatBytes(u.plan.Bytes), u.plan.Ignored)
	if err := opts.Upload(ctx, opts, allocID, script, u); err != nil {
		return "", &cmdutil.CodedError{Code: cmdutil.ExitJobPlatformFailure,
			Err: fmt.Errorf("workdir: upload to %s failed, nothing ran: %w", allocID, err)}
	}
	return workdir.NodePath(name), nil
}

// sshUpload runs script on the allocation with OpenSSH through the
// gateway (the context's certificate and config, as `gpuaas ssh`), the
// workdir's tar stream on its standard input.
func sshUpload(ctx context.Context, opts *RunOptions, allocID, script string, u *upload) error {
	sshPath, err := exec.LookPath("ssh")
	if err != nil {
		return errors.New("ssh not found: install the OpenSSH client (package openssh-client on Debian and Ubuntu)")
	}
	s, err := sshconfig.Prepare(ctx, opts.SSH, "")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, sshPath, "-F", s.Paths.Config, "-o", "BatchMode=yes",
		allocID+"@"+s.Alias, "--", script)
	var tail bytes.Buffer
	cmd.Stdout = opts.IO.ErrOut
	cmd.Stderr = &lineTail{w: opts.IO.ErrOut, tail: &tail}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run ssh: %w", err)
	}
	sent := make(chan error, 1)
	go func() {
		err := u.plan.WriteTar(stdin, u.manifest)
		if cerr := stdin.Close(); err == nil {
			err = cerr
		}
		sent <- err
	}()
	werr := cmd.Wait()
	serr := <-sent
	if werr != nil {
		if last := strings.TrimSpace(tail.String()); last != "" {
			return fmt.Errorf("%s", lastLine(last))
		}
		return fmt.Errorf("ssh: %w", werr)
	}
	if serr != nil {
		return serr
	}
	return nil
}

// lineTail copies to w and keeps the last bytes written in tail.
type lineTail struct {
	w    io.Writer
	tail *bytes.Buffer
}

func (l *lineTail) Write(p []byte) (int, error) {
	l.tail.Write(p)
	if l.tail.Len() > 4096 {
		b := l.tail.Bytes()[l.tail.Len()-4096:]
		l.tail.Reset()
		l.tail.Write(b)
	}
	return l.w.Write(p)
}

// lastLine is the last line of s, without the node's "gpuaas: " prefix.
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimPrefix(s, "gpuaas: ")
}

// formatBytes prints n in MiB with one decimal (KiB below one MiB).
func formatBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
