// Package volsftp serves sftp on a volume that no allocation has: the
// process hostd's terminal starts for `sftp <volume-id>@gateway`
// (docs/volumes.md, "Data without a GPU"). It starts as root, chroots into
// the volume's mount point, drops to the session's unprivileged uid and
// gid (no supplementary groups, no_new_privs) and only then serves the
// sftp protocol (pkg/sftp) on its standard input and output. It runs no
// other program and opens no socket: the session can do what sftp can, as
// that uid, inside the volume, and nothing else.
//
// Why a process of its own: chroot and the uid are a process's, and hostd
// (root, many goroutines) can have neither changed. Why chroot is enough
// here: the volume is its own filesystem mounted nodev,nosuid, so no hard
// link leads out of it, a symbolic link resolves inside the new root, and
// the process cannot regain root (no set-uid file can be run: it runs
// none, and no_new_privs would refuse one).
package volsftp

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/pkg/sftp"
)

// Args are the helper's arguments (after the command that runs it) for
// serving dir as uid:gid.
func Args(dir string, uid, gid int) []string {
	return []string{dir, strconv.Itoa(uid), strconv.Itoa(gid)}
}

// Main serves one sftp session over in and out, args being Args' (DIR
// UID GID), and returns the process's exit status. Failures before the
// protocol starts are written to errOut.
func Main(args []string, in io.Reader, out io.WriteCloser, errOut io.Writer) int {
	if err := enter(args); err != nil {
		fmt.Fprintf(errOut, "volume sftp: %v\n", err)
		return 2
	}
	srv, err := sftp.NewServer(stdio{in, out}, sftp.WithServerWorkingDirectory("/"))
	if err != nil {
		fmt.Fprintf(errOut, "volume sftp: %v\n", err)
		return 2
	}
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(errOut, "volume sftp: %v\n", err)
		return 1
	}
	return 0
}

// stdio is the session's two streams as one.
type stdio struct {
	io.Reader
	out io.WriteCloser
}

func (s stdio) Write(p []byte) (int, error) { return s.out.Write(p) }
func (s stdio) Close() error                { return s.out.Close() }
