package sshkeys

import (
	"errors"

	"github.com/gpuaas/gpuaas/internal/api"
)

// ErrBadKey is returned when the context's key file exists but is not an
// unencrypted ed25519 OpenSSH key. It is never replaced automatically.
var ErrBadKey = errors.New("unusable ssh key")

// ErrBadCertificate is returned when controld answers with something other
// than a user certificate for the key it was asked to sign.
var ErrBadCertificate = errors.New("unexpected ssh certificate")

// errNotLoggedIn and errSessionExpired carry the unauthenticated code, so
// the CLI prints its usual "run `gpuaas login`" hint and exit code.
var (
	errNotLoggedIn    = &api.Error{Code: api.CodeUnauthenticated, Message: "not logged in: an SSH certificate needs a session"}
	errSessionExpired = &api.Error{Code: api.CodeUnauthenticated, Message: "session expired: the SSH certificate cannot be renewed"}
)
