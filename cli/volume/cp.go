package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CpOptions are the inputs of `gpuaas volume cp`.
type CpOptions struct {
	sshconfig.Env
	// LookPath finds the sftp program (exec.LookPath).
	LookPath func(file string) (string, error)
	// Exec runs argv with the command's output streams and returns its
	// exit status. Tests replace it to check argv and the batch alone.
	Exec func(ctx context.Context, ios *cmdutil.IOStreams, argv []string) (int, error)

	Src, Dst  string
	Recursive bool
}

// NewCmdCp builds `gpuaas volume cp`; runF replaces cpRun in tests.
func NewCmdCp(f *cmdutil.Factory, runF func(context.Context, *CpOptions) error) *cobra.Command {
	opts := &CpOptions{Env: sshconfig.EnvOf(f), LookPath: exec.LookPath, Exec: execSFTP}
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files to or from a volume, without an allocation",
		Long: `Copy a file (or, with -r, a directory) between this machine and a volume
that no allocation has: one of SRC and DST is VOLUME:PATH (VOLUME a name or
an id), the other a local path. No GPU is rented and nothing is billed but
the volume's GiB-hours: the data goes through the gateway to the volume's
node with sftp, as ` + "`sftp <volume-id>@gateway`" + ` does (OpenSSH's sftp runs with
the config ` + "`gpuaas ssh-config`" + ` writes). While the copy runs the volume is
attached to it: an allocation cannot take it meanwhile, and a volume an
allocation has is refused, naming it (copy through the allocation then).
A local path containing ':' is written ./like:this.`,
		Example: `  gpuaas volume cp ./weights.bin data:/models/weights.bin
  gpuaas volume cp -r data:/checkpoints ./checkpoints
  gpuaas volume cp vol-7k2m9x4q1c:/results.csv .`,
		Args: cmdutil.ExactArgs(2, "SRC and DST"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Src, opts.Dst = args[0], args[1]
			if _, _, _, err := direction(opts.Src, opts.Dst); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return cpRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Recursive, "recursive", "r", false, "Copy directories and what they hold")
	return cmd
}

// volumeRefRE is what may stand before the ':' of VOLUME:PATH: a volume
// id or name (api.CheckVolumeName's alphabet).
var volumeRefRE = regexp.MustCompile(`^(vol-[0-9a-z]+|[a-z][a-z0-9-]{0,39})$`)

// remotePath splits VOLUME:PATH; ok is false for a local path.
func remotePath(s string) (ref, path string, ok bool) {
	ref, path, found := strings.Cut(s, ":")
	if !found || !volumeRefRE.MatchString(ref) {
		return "", "", false
	}
	if path == "" {
		path = "/"
	}
	return ref, path, true
}

// direction tells which side is the volume's: upload is true when DST is.
func direction(src, dst string) (ref string, upload bool, paths [2]string, err error) {
	sref, spath, sremote := remotePath(src)
	dref, dpath, dremote := remotePath(dst)
	switch {
	case sremote && dremote:
		return "", false, paths, cmdutil.FlagErrorf("both %q and %q name a volume: one side must be a local path", src, dst)
	case !sremote && !dremote:
		return "", false, paths, cmdutil.FlagErrorf("neither %q nor %q names a volume (VOLUME:PATH)", src, dst)
	case dremote:
		return dref, true, [2]string{src, dpath}, checkPaths(src, dpath)
	default:
		return sref, false, [2]string{spath, dst}, checkPaths(spath, dst)
	}
}

// checkPaths refuses what sftp's batch language cannot carry.
func checkPaths(ps ...string) error {
	for _, p := range ps {
		if p == "" || strings.ContainsAny(p, "\n\r\x00") {
			return cmdutil.FlagErrorf("path %q is empty or holds a line break", p)
		}
	}
	return nil
}

func cpRun(ctx context.Context, opts *CpOptions) error {
	ref, upload, paths, err := direction(opts.Src, opts.Dst)
	if err != nil {
		return err
	}
	sftpPath, err := opts.LookPath("sftp")
	if err != nil {
		return errors.New("sftp not found: install the OpenSSH client (package openssh-client on Debian and Ubuntu, openssh-clients on Fedora)")
	}
	id, err := volumeID(ctx, opts.Env, ref)
	if err != nil {
		return err
	}
	s, err := sshconfig.Prepare(ctx, opts.Env, "")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gpuaas-cp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	batch := filepath.Join(dir, "batch")
	if err := os.WriteFile(batch, []byte(Batch(upload, opts.Recursive, paths[0], paths[1])), 0o600); err != nil {
		return err
	}
	status, err := opts.Exec(ctx, opts.IO, SFTPArgv(sftpPath, s.Paths.Config, s.Alias, id, batch))
	if err != nil {
		return err
	}
	if status != 0 {
		return cmdutil.ExitStatus("sftp", status)
	}
	return nil
}

// volumeID resolves a volume name (in the command's project) to its id;
// an id is checked the same way, so a volume of another project is
// refused here as the gateway would.
func volumeID(ctx context.Context, env sshconfig.Env, ref string) (string, error) {
	client, err := env.Client()
	if err != nil {
		return "", err
	}
	v, err := client.VolumeGet(ctx, api.VolumeRef{Volume: ref})
	if err != nil {
		return "", err
	}
	return v.ID, nil
}

// SFTPArgv is the sftp command line: the generated config (-F), a batch
// file (-b: the first failing command fails the run), and the volume id
// as the user at the context's gateway alias.
func SFTPArgv(sftpPath, configFile, alias, volumeID, batch string) []string {
	return []string{sftpPath, "-F", configFile, "-b", batch, volumeID + "@" + alias}
}

// Batch is the sftp batch that copies src to dst: put when uploading
// (after making dst's parent directories on the volume: "-mkdir", whose
// failure for one that exists is ignored), get otherwise, -R for a
// directory.
func Batch(upload, recursive bool, src, dst string) string {
	var b strings.Builder
	verb := "get"
	if upload {
		verb = "put"
		dir := path.Dir(path.Clean("/" + dst))
		if strings.HasSuffix(dst, "/") {
			dir = path.Clean("/" + dst)
		}
		var parents []string
		for ; dir != "/" && dir != "."; dir = path.Dir(dir) {
			parents = append([]string{dir}, parents...)
		}
		for _, d := range parents {
			fmt.Fprintf(&b, "-mkdir %s\n", quote(d))
		}
	}
	if recursive {
		verb += " -R"
	}
	fmt.Fprintf(&b, "%s %s %s\n", verb, quote(src), quote(dst))
	return b.String()
}

// quote writes s as one word of sftp's batch language.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// execSFTP runs argv with the command's output streams and no input (the
// batch is a file) and returns its exit status.
func execSFTP(ctx context.Context, ios *cmdutil.IOStreams, argv []string) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = ios.Out, ios.ErrOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("run sftp: %w", err)
	}
	return 0, nil
}
