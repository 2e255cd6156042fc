package sshgate

import (
	"errors"

	"github.com/gpuaas/gpuaas/gateway/core"
)

// Errors of the gateway. Refusals of a user's connection are logged with
// their reason and answered with a generic message.
var (
	// ErrConfig is a Config that CheckAndSetDefaults refuses.
	ErrConfig = errors.New("invalid sshgate config")
	// ErrNoIdentity is a session whose connection carries no identity
	// proven by the key that authenticated (see sshcert.VerifiedFrom).
	ErrNoIdentity = errors.New("no verified identity on this connection")
	// ErrCertificateNoLongerValid is a new session on a connection whose
	// certificate has expired or whose CA is no longer trusted.
	ErrCertificateNoLongerValid = errors.New("certificate no longer valid")
	// ErrHostdKey is a node terminal host key the gateway does not trust.
	ErrHostdKey = core.ErrHostdKey
	// ErrNotPermitted is a request the certificate's extensions do not
	// permit (a PTY, port forwarding).
	ErrNotPermitted = errors.New("not permitted by the certificate")
	// ErrNoCAKeys is a controld answer without user CA keys.
	ErrNoCAKeys = core.ErrNoCAKeys
	// ErrNoGatewayCredentials is a connection to a node attempted without
	// a valid gateway certificate (the gateway key is not registered, or
	// controld could not be reached to renew it).
	ErrNoGatewayCredentials = core.ErrNoGatewayCredentials
)
