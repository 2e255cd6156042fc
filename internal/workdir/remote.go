package workdir

import (
	"fmt"
	"regexp"
)

// Dir is where uploads live on the node, relative to the renter's home.
const Dir = ".gpuaas/workdirs"

// Exit codes of RemoteScript, one per way an upload fails on the node.
const (
	ExitUnpackSetup = 70 // the upload's directory could not be made or moved into place
	ExitTarFailed   = 71 // tar failed: the stream ended early or is damaged
	ExitNoManifest  = 72 // the stream ended before its manifest
	ExitBadSum      = 73 // a file's sha256 differs from the manifest
)

var uploadNameRe = regexp.MustCompile(`^w-[0-9a-f]{20}$`)

// RemoteScript is the POSIX shell script that receives an upload on the
// node, run as the renter over SSH with the tar stream (WriteTar) on its
// standard input: it unpacks into a fresh directory beside the final
// one, checks every file against the manifest with `sha256sum -c`, and
// only then moves the files to ~/.gpuaas/workdirs/NAME. A stream cut
// short or damaged fails with one of the Exit* codes and a "gpuaas:"
// line on standard error, leaving nothing behind. An upload already
// there (a retried run with the same files) is kept: the job may run in
// it.
func RemoteScript(name string) (string, error) {
	if !uploadNameRe.MatchString(name) {
		return "", fmt.Errorf("upload name %q: want w- and 20 hex digits", name)
	}
	return fmt.Sprintf(`set -u
umask 077
fail() { echo "gpuaas: $1" >&2; exit %[2]d; }
cd || fail "cannot enter the home directory"
d=%[1]s/%[3]s
if [ -d "$d" ]; then cat >/dev/null; echo "gpuaas: workdir ~/$d is there already (same files)" >&2; exit 0; fi
t="$d.part.$$"
mkdir -p %[1]s && rm -rf -- "$t" && mkdir -- "$t" || fail "cannot make the upload's directory under ~/%[1]s"
if ! (cd -- "$t" && tar -xf -); then
  rm -rf -- "$t"; echo "gpuaas: upload incomplete: the stream ended early or is damaged (tar failed)" >&2; exit %[4]d
fi
if [ ! -f "$t/%[7]s" ]; then
  rm -rf -- "$t"; echo "gpuaas: upload incomplete: the stream ended before its manifest" >&2; exit %[5]d
fi
if ! (cd -- "$t" && sha256sum -c %[7]s >check.out 2>&1); then
  grep -v ': OK$' "$t/check.out" | head -n 20 >&2
  rm -rf -- "$t"; echo "gpuaas: upload damaged: a file's sha256 differs from the manifest" >&2; exit %[6]d
fi
mkdir -p -- "$t/%[8]s" && mv -- "$t/%[8]s" "$d" && rm -rf -- "$t" || fail "cannot move the upload to ~/$d"
echo "gpuaas: workdir unpacked and checked in ~/$d" >&2
`, Dir, ExitUnpackSetup, name, ExitTarFailed, ExitNoManifest, ExitBadSum, ManifestName, FilesDir), nil
}

// NodePath is the upload's directory as job.create's workdir takes it:
// relative to the renter's home.
func NodePath(name string) string { return Dir + "/" + name }
