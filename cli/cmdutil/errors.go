package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/internal/clip"
)

// FlagError is a usage error: a bad flag, a wrong number of arguments or a
// missing required value. It exits 2 and prints a pointer to --help.
type FlagError struct{ err error }

// Error implements error.
func (e *FlagError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *FlagError) Unwrap() error { return e.err }

// FlagErrorf builds a FlagError. Runaway string arguments (user input)
// are cut (clip.Args).
func FlagErrorf(format string, args ...any) error {
	return &FlagError{err: fmt.Errorf(format, clip.Args(args)...)}
}

// FlagErrorWrap makes err a usage error. A flag value pflag could not
// parse is said in words ("--gpus takes a whole number"), not with the Go
// parser's error.
func FlagErrorWrap(err error) error {
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) {
		err = invalidFlagValue(invalid)
	}
	return &FlagError{err: err}
}

// ErrCancelled is returned when the user declines a confirmation prompt.
var ErrCancelled = errors.New("cancelled")

// ErrNoProject is returned by commands that need a project when none was
// given and the context has no default.
var ErrNoProject = FlagErrorf("no project: pass --project or set a default with `gpuaas project use NAME`")

// NoArgs rejects any positional argument, as a usage error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return FlagErrorf("unexpected argument %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

// ExactArgs requires n positional arguments; what names them in the error
// (e.g. "an allocation ID").
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return FlagErrorf("%s requires %s", cmd.CommandPath(), what)
		case len(args) > n:
			return FlagErrorf("too many arguments for %q: %s", cmd.CommandPath(), strings.Join(args[n:], " "))
		}
		return nil
	}
}

// RangeArgs requires between min and max positional arguments.
func RangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < min:
			return FlagErrorf("%s requires %s", cmd.CommandPath(), what)
		case max >= 0 && len(args) > max:
			return FlagErrorf("too many arguments for %q: %s", cmd.CommandPath(), strings.Join(args[max:], " "))
		}
		return nil
	}
}

// CodedError is an error with its own exit code (a failed allocation, a
// wait that timed out).
type CodedError struct {
	Code int
	Err  error
}

// Error implements error.
func (e *CodedError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *CodedError) Unwrap() error { return e.Err }
