package guestimage

import "errors"

var (
	// ErrNotRoot is returned by Build when the process is not root:
	// debootstrap and chroot need it.
	ErrNotRoot = errors.New("building a guest image needs root (debootstrap and chroot); run it as root, e.g. sudo gpuaas ops image build")
	// ErrMissingTool is returned when a program the build or the seed
	// needs is not installed.
	ErrMissingTool = errors.New("missing tool")
	// ErrNoManifest is returned by Verify for a directory without a
	// readable manifest.
	ErrNoManifest = errors.New("no image manifest")
	// ErrDigestMismatch is returned by Verify when a file's SHA-256 is not
	// the one its manifest records: the image is corrupt or was changed.
	ErrDigestMismatch = errors.New("image digest mismatch")
)
