package volume

import "errors"

// Errors of a Store.
var (
	// ErrInvalid wraps a volume id, size or mount target that cannot be
	// acted on.
	ErrInvalid = errors.New("volume: invalid request")
	// ErrNotFound: no volume of that id on this node.
	ErrNotFound = errors.New("volume: not found")
	// ErrExists: Create of an id that exists with another size.
	ErrExists = errors.New("volume: exists with another size")
	// ErrShrink: Grow to a size smaller than the volume's.
	ErrShrink = errors.New("volume: volumes only grow")
	// ErrNoSpace: the node's data disk has not the room asked for.
	ErrNoSpace = errors.New("volume: not enough free space on the node")
	// ErrMounted: Delete of a mounted volume, or Mount of one mounted
	// elsewhere.
	ErrMounted = errors.New("volume: mounted")
	// ErrCorrupt: e2fsck found errors it could not correct.
	ErrCorrupt = errors.New("volume: filesystem errors left uncorrected")
)
