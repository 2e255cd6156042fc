package sshconfig

import "errors"

// ErrNoHostCA is returned when controld lists no host CA key, so the
// gateway's host certificate could not be checked.
var ErrNoHostCA = errors.New("controld lists no host CA key for the gateway")
