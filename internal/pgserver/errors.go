package pgserver

import "errors"

var (
	// ErrNotInstalled means the PostgreSQL server binaries (initdb, postgres)
	// were not found in Config.BinDir or in any of the usual places.
	ErrNotInstalled = errors.New("PostgreSQL server binaries not found (initdb, postgres)")

	// ErrDirNotReachable means that, when running as root, the postgres OS user
	// cannot traverse one of the data directory's ancestors.
	ErrDirNotReachable = errors.New("data directory not reachable by the postgres user")

	// ErrNoServiceUser means the process runs as root, which initdb and postgres
	// refuse, and there is no postgres OS user to run them as instead.
	ErrNoServiceUser = errors.New("running as root and no postgres OS user to run PostgreSQL as")

	// ErrAlreadyRunning means a live postmaster already serves the data directory.
	ErrAlreadyRunning = errors.New("a PostgreSQL server is already running on this data directory")

	// ErrExited means the postgres process exited before it accepted connections.
	ErrExited = errors.New("postgres exited during startup")
)
