package jobs

import (
	"path"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// maxWorkdirBytes bounds job.create's workdir.
const maxWorkdirBytes = 1024

// checkWorkdir refuses a workdir hostd could not start a job in as
// written: it is a path relative to the renter's home (or absolute),
// clean (no "..", no "." or empty segments), without NUL or a newline
// (docs/decisions/0027-workdir-upload.md). Empty is the home.
func checkWorkdir(dir string) error {
	if dir == "" {
		return nil
	}
	bad := func(why string) error {
		return api.Errorf(api.CodeInvalidArgument, "workdir: %q %s", dir, why)
	}
	switch {
	case len(dir) > maxWorkdirBytes:
		return api.Errorf(api.CodeInvalidArgument, "workdir: %d bytes; at most %d", len(dir), maxWorkdirBytes)
	case strings.ContainsAny(dir, "\x00\n\r"):
		return bad("contains a NUL byte or a line break")
	case path.Clean(dir) != dir || dir == "." || strings.HasPrefix(dir, "../") || dir == "..":
		return bad("is not a clean path (no '..', '.', '//' or trailing '/'), relative to the home or absolute")
	}
	return nil
}
