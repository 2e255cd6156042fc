package sshconfig

import "errors"

// ErrNoGateway is returned when no gateway address is known: controld
// publishes none and the context has no --gateway override.
var ErrNoGateway = errors.New("no SSH gateway address: controld publishes none; set one with `gpuaas ssh-config --gateway HOST:PORT`")
