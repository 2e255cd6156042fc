package sshcert

import (
	"errors"
	"fmt"
)

// Errors returned by the Verify functions and by VerifiedFrom; each wraps
// ErrRefused, so a server can log the precise reason and still answer every
// refusal the same way.
var (
	ErrRefused        = errors.New("ssh certificate refused")
	ErrNotCertificate = fmt.Errorf("%w: not a certificate", ErrRefused)
	ErrWrongCertType  = fmt.Errorf("%w: wrong certificate type", ErrRefused)
	ErrUntrustedCA    = fmt.Errorf("%w: not signed by a trusted authority", ErrRefused)
	ErrExpired        = fmt.Errorf("%w: expired", ErrRefused)
	ErrNotYetValid    = fmt.Errorf("%w: not yet valid", ErrRefused)
	ErrValidity       = fmt.Errorf("%w: validity window not accepted", ErrRefused)
	ErrPrincipal      = fmt.Errorf("%w: principal not accepted", ErrRefused)
	ErrCriticalOption = fmt.Errorf("%w: critical option not accepted", ErrRefused)
	ErrWrongNode      = fmt.Errorf("%w: ticket for another node", ErrRefused)
	ErrUnverifiedKey  = fmt.Errorf("%w: identity not bound to the key that authenticated", ErrRefused)
)

// ErrInvalidRequest is returned by the Sign methods and constructors when
// what they are asked to mint or load is not acceptable.
var ErrInvalidRequest = errors.New("invalid ssh certificate request")
