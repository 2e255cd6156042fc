package host

import "context"

// Users is what the bare-metal tasks need of the host's POSIX accounts;
// the real one uses useradd/userdel, the sim keeps sandbox users.
type Users interface {
	// Create adds a user with a home directory, a login shell and these
	// authorized SSH keys. Creating an existing user fails.
	Create(ctx context.Context, name string, authorizedKeys []string) error
	// Exists reports whether the user exists.
	Exists(ctx context.Context, name string) (bool, error)
	// KillProcesses ends every process of the user (SIGTERM, then SIGKILL),
	// also those that left their session (nohup, setsid, daemons).
	KillProcesses(ctx context.Context, name string) error
	// Delete removes the user, their home directory and everything else
	// of theirs on the node (files anywhere on its local filesystems,
	// System V IPC objects, crontab and at jobs: ScrubUser), and returns
	// what it removed besides the account and home. Deleting a user that
	// does not exist is not an error.
	Delete(ctx context.Context, name string) (Removed, error)
}

// Runner runs host commands (qemu-img, cloud-localds, blkdiscard, ...);
// the sim records them and can be told to fail.
type Runner interface {
	// Run runs name with args and returns its combined output; a non-zero
	// exit is an error that includes the output.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}
