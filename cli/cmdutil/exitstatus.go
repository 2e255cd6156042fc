package cmdutil

import (
	"errors"
	"fmt"
)

// ErrReported marks an error the user has already seen: a program gpuaas
// ran in the foreground (ssh) printed its own message. The CLI prints
// nothing more for it and exits with its code.
var ErrReported = errors.New("already reported")

// ExitStatus is the error of a foreground program that exited with a
// non-zero status: gpuaas exits with the same status and prints nothing.
func ExitStatus(program string, status int) error {
	return &CodedError{Code: status, Err: fmt.Errorf("%s exited with status %d: %w", program, status, ErrReported)}
}
