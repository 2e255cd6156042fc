package sshlink

import "errors"

var (
	// ErrClosed is returned by operations on a closed link or channel.
	ErrClosed = errors.New("sshlink: link closed")
	// ErrProtocol is wrapped by errors caused by a misbehaving peer.
	ErrProtocol = errors.New("sshlink: protocol error")
	// ErrFrameTooLarge is wrapped when a peer announces an oversized frame.
	ErrFrameTooLarge = errors.New("sshlink: frame too large")
	// ErrAuth is wrapped by authentication failures on either side.
	ErrAuth = errors.New("sshlink: authentication failed")
	// ErrAlreadyReplied is returned by Reply on a link request answered before.
	ErrAlreadyReplied = errors.New("sshlink: request already answered")
	// ErrHostKey is wrapped when the server's key is refused by the pin.
	ErrHostKey = errors.New("sshlink: host key refused")
)
