package volume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path"

	"github.com/pkg/sftp"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
)

// SyncOptions are the inputs of `gpuaas volume sync`.
type SyncOptions struct {
	sshconfig.Env
	// LookPath finds the ssh program (exec.LookPath).
	LookPath func(file string) (string, error)
	Src, Dst string
}

// NewCmdSync builds `gpuaas volume sync`; runF replaces syncRun in tests.
func NewCmdSync(f *cmdutil.Factory, runF func(context.Context, *SyncOptions) error) *cobra.Command {
	opts := &SyncOptions{Env: sshconfig.EnvOf(f), LookPath: exec.LookPath}
	cmd := &cobra.Command{
		Use:   "sync SRC DST",
		Short: "Copy what changed in a directory to or from a volume, without an allocation",
		Long: `Make DST hold SRC's files: one is VOLUME:DIR (VOLUME a name or an id), the
other a local directory. A file is copied when DST lacks it or has it with
another size or modification time (which the copy then takes); files already
the same are left alone, nothing is deleted, and symbolic links are skipped
(and counted). Like ` + "`volume cp`" + `, it goes through the gateway to a volume no
allocation has, with sftp (OpenSSH's ssh runs the sftp subsystem with the
config ` + "`gpuaas ssh-config`" + ` writes); rsync cannot be used: it needs a process of
its own on the volume's side, which a volume session never runs.`,
		Example: `  gpuaas volume sync ./dataset data:/dataset
  gpuaas volume sync data:/checkpoints ./checkpoints`,
		Args: cmdutil.ExactArgs(2, "SRC and DST"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Src, opts.Dst = args[0], args[1]
			if _, _, _, err := direction(opts.Src, opts.Dst); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return syncRun(c.Context(), opts)
		},
	}
	return cmd
}

func syncRun(ctx context.Context, opts *SyncOptions) error {
	ref, upload, paths, err := direction(opts.Src, opts.Dst)
	if err != nil {
		return err
	}
	sshPath, err := opts.LookPath("ssh")
	if err != nil {
		return errors.New("ssh not found: install the OpenSSH client (package openssh-client on Debian and Ubuntu, openssh-clients on Fedora)")
	}
	id, err := volumeID(ctx, opts.Env, ref)
	if err != nil {
		return err
	}
	s, err := sshconfig.Prepare(ctx, opts.Env, "")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, sshPath, "-F", s.Paths.Config, "-s", id+"@"+s.Alias, "sftp")
	cmd.Stderr = opts.IO.ErrOut
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run ssh: %w", err)
	}
	client, err := sftp.NewClientPipe(r, w)
	if err != nil {
		_ = cmd.Wait()
		return fmt.Errorf("sftp to volume %s: %w", ref, err)
	}
	var src, dst tree = localTree{}, remoteTree{client}
	if !upload {
		src, dst = dst, src
	}
	st, err := Sync(src, paths[0], dst, paths[1])
	_ = client.Close()
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("ssh: %w", werr)
	}
	fmt.Fprintf(opts.IO.ErrOut, "%d copied (%d bytes), %d already the same, %d links skipped\n", st.Copied, st.Bytes, st.Same, st.Links)
	return err
}

// SyncStats counts what Sync did.
type SyncStats struct {
	Copied, Same, Links int
	Bytes               int64
}

// Sync copies each regular file under srcDir in src to the same place
// under dstDir in dst when dst lacks it or differs in size or
// modification time (to the second), giving the copy src's time.
func Sync(src tree, srcDir string, dst tree, dstDir string) (SyncStats, error) {
	var st SyncStats
	if err := dst.mkdirAll(dstDir); err != nil {
		return st, fmt.Errorf("sync: %w", err)
	}
	err := src.walk(srcDir, func(rel string, fi fs.FileInfo) error {
		to := path.Join(dstDir, rel)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			st.Links++
			return nil
		case fi.IsDir():
			return dst.mkdirAll(to)
		case !fi.Mode().IsRegular():
			return nil
		}
		if have, err := dst.stat(to); err == nil && have.Mode().IsRegular() && have.Size() == fi.Size() &&
			have.ModTime().Unix() == fi.ModTime().Unix() {
			st.Same++
			return nil
		}
		n, err := copyFile(src, path.Join(srcDir, rel), dst, to)
		if err != nil {
			return err
		}
		st.Copied++
		st.Bytes += n
		return dst.chtimes(to, fi.ModTime())
	})
	if err != nil {
		return st, fmt.Errorf("sync: %w", err)
	}
	return st, nil
}

func copyFile(src tree, from string, dst tree, to string) (int64, error) {
	in, err := src.open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := dst.create(to)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("copy %s: %w", from, err)
	}
	return n, nil
}
