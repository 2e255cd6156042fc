package daemon

import (
	"fmt"
	"github.com/spf13/cobra"
	"io"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/hostd/volsftp"
)

// newCmdVolumeSFTP builds `gpuaas hostd volume-sftp DIR UID GID`, hidden:
// the process hostd's terminal starts (as root) for one sftp session on a
// volume, which chroots into DIR, becomes UID:GID and serves sftp on its
// standard input and output (hostd/volsftp). Not for people.
func newCmdVolumeSFTP(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "volume-sftp DIR UID GID",
		Short:  "Serve sftp on a mounted volume, chrooted, as an unprivileged uid (hostd's own use)",
		Hidden: true,
		Args:   cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			ios := f.IOStreams
			if code := volsftp.Main(args, ios.In, nopCloser{ios.Out}, ios.ErrOut); code != 0 {
				return fmt.Errorf("volume sftp: exit status %d", code)
			}
			return nil
		},
	}
}

// nopCloser is the standard output, which the process closes by exiting.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
