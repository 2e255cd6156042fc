package core

import "errors"

// Errors of the gateway core. The fronts re-export them (sshgate.ErrHostdKey
// is ErrHostdKey), so errors.Is works with either name.
var (
	// ErrConfig is a Config that CheckAndSetDefaults refuses.
	ErrConfig = errors.New("invalid gateway core config")
	// ErrHostdKey is a node terminal host key the gateway does not trust.
	ErrHostdKey = errors.New("hostd host key not trusted")
	// ErrNoCAKeys is a controld answer without user CA keys.
	ErrNoCAKeys = errors.New("controld listed no user CA keys")
	// ErrNoGatewayCredentials is a connection to a node attempted without
	// a valid gateway certificate (the gateway key is not registered, or
	// controld could not be reached to renew it).
	ErrNoGatewayCredentials = errors.New("no gateway certificate")
	// ErrNoTrust is a connection to a node attempted before the CA keys
	// were read (SetTrust or RefreshTrust).
	ErrNoTrust = errors.New("CA keys not read yet")
)
