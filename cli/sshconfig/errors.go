package sshconfig

import "errors"

// ErrNoGateway is returned when no gateway address is known: controld
// publishes none and the context has no --gateway override.
var ErrNoGateway = errors.New("no SSH gateway address: controld publishes none; set one with `gpuaas ssh-config --gateway HOST:PORT`")

// ErrNoHostCA is returned when controld lists no host CA key, so the
// gateway's host certificate could not be checked.
var ErrNoHostCA = errors.New("controld lists no host CA key for the gateway")
