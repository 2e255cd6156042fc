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
	// Delete removes from DST what SRC lacks (asked first on a terminal
	// unless Yes).
	Delete, Yes bool
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
the same are left alone, and symbolic links are skipped (and counted),
as is a place where DST has a symbolic link: sync never writes through a
link. With --delete, what DST has and SRC lacks is deleted first (and an
entry of another kind than SRC's: a directory where SRC has a file);
the list is shown, and on a terminal you are asked to confirm unless
--yes is given; without a terminal --delete needs --yes. Links are
deleted as links, never followed out of the tree. Like ` + "`volume cp`" + `, it goes through the gateway to a volume no
allocation has, with sftp (OpenSSH's ssh runs the sftp subsystem with the
config ` + "`gpuaas ssh-config`" + ` writes); rsync cannot be used: it needs a process of
its own on the volume's side, which a volume session never runs.`,
		Example: `  gpuaas volume sync ./dataset data:/dataset
  gpuaas volume sync data:/checkpoints ./checkpoints
  gpuaas volume sync --delete ./dataset data:/dataset`,
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
	cmd.Flags().BoolVar(&opts.Delete, "delete", false, "Delete what DST has and SRC lacks (lists it and asks first)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "With --delete: do not ask")
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
	st, err := syncDelete(ctx, opts, src, paths[0], dst, paths[1])
	_ = client.Close()
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("ssh: %w", werr)
	}
	if st != nil {
		fmt.Fprintf(opts.IO.ErrOut, "%d copied (%d bytes), %d already the same, %d links skipped", st.Copied, st.Bytes, st.Same, st.Links)
		if opts.Delete {
			fmt.Fprintf(opts.IO.ErrOut, ", %d deleted", st.Deleted)
		}
		fmt.Fprintln(opts.IO.ErrOut)
	}
	return err
}

// syncDelete is Sync, preceded with --delete by the listing, the
// confirmation and the deletion of what DST has and SRC lacks. Refused or
// cancelled, it returns nil stats: nothing was copied or deleted.
func syncDelete(ctx context.Context, opts *SyncOptions, src tree, srcDir string, dst tree, dstDir string) (*SyncStats, error) {
	var deleted int
	if opts.Delete {
		extras, err := Extras(src, srcDir, dst, dstDir)
		if err != nil {
			return nil, err
		}
		if err := confirmDeletes(ctx, opts.IO, opts.Dst, extras, opts.Yes); err != nil {
			return nil, err
		}
		if deleted, err = DeleteExtras(dst, dstDir, extras); err != nil {
			return &SyncStats{Deleted: deleted}, err
		}
	}
	st, err := Sync(src, srcDir, dst, dstDir)
	st.Deleted = deleted
	return &st, err
}

// SyncStats counts what Sync did.
type SyncStats struct {
	Copied, Same, Links, Deleted int
	Bytes                        int64
}

// Sync copies each regular file under srcDir in src to the same place
// under dstDir in dst when dst lacks it or differs in size or
// modification time (to the second), giving the copy src's time. Where
// dst has a symbolic link, nothing is written through it (it is counted
// with the links skipped): a link out of the tree leads nowhere.
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
			if have, err := dst.stat(to); err == nil && have.Mode()&fs.ModeSymlink != 0 {
				st.Links++
				return fs.SkipDir
			}
			return dst.mkdirAll(to)
		case !fi.Mode().IsRegular():
			return nil
		}
		have, err := dst.stat(to)
		if err == nil && have.Mode()&fs.ModeSymlink != 0 {
			st.Links++
			return nil
		}
		if err == nil && have.Mode().IsRegular() && have.Size() == fi.Size() &&
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
