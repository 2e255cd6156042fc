package topology

import "errors"

var (
	// ErrInvalidOptions is returned for an unknown shape, a missing host
	// name or an unusable slot subnet.
	ErrInvalidOptions = errors.New("invalid discovery options")
	// ErrInvalidHost is returned when a Host lacks a file tree or LookPath.
	ErrInvalidHost = errors.New("invalid host")
	// ErrNoPCI is returned when the PCI bus cannot be listed.
	ErrNoPCI = errors.New("cannot list PCI devices")
	// ErrSubnetFull is returned when the slot subnet has no address left
	// for a GPU.
	ErrSubnetFull = errors.New("slot subnet full")
)
