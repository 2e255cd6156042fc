package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// RunError is a command that ran and failed: a non-zero exit, a signal,
// or a program that could not be started. Output is the combined output.
type RunError struct {
	Command  string // name and arguments, space-separated
	ExitCode int    // -1 when the program did not exit normally
	Output   []byte
	Err      error
}

// outputTail bounds how much of a failed command's output goes into the
// error message: the end is where tools say what went wrong.
const outputTail = 1024

func (e *RunError) Error() string {
	msg := e.Command + ": " + e.Err.Error()
	if tail := Tail(e.Output, outputTail); tail != "" {
		msg += ": " + tail
	}
	return msg
}

func (e *RunError) Unwrap() error { return e.Err }

// Tail is the last n bytes of out, trimmed, on one line (newlines become
// " | "), prefixed with "..." when cut.
func Tail(out []byte, n int) string {
	out = bytes.TrimSpace(out)
	cut := len(out) > n
	if cut {
		out = out[len(out)-n:]
	}
	s := strings.Join(strings.Fields(strings.ReplaceAll(string(out), "\n", " | ")), " ")
	if cut {
		s = "..." + s
	}
	return s
}

// ExecRunner runs commands on the host with os/exec. The zero value is
// ready to use.
type ExecRunner struct {
	// WaitDelay bounds how long Run waits for the output pipe after the
	// program exits or is killed, in case a child it left behind holds
	// it; zero means 5s.
	WaitDelay time.Duration
}

var _ Runner = ExecRunner{}

// Run runs name with args and returns the combined output. A failure is a
// *RunError with the exit status and the tail of the output; a cancelled
// ctx kills the program and the error wraps ctx.Err().
func (r ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = r.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		return out, nil
	}
	line := strings.Join(append([]string{name}, args...), " ")
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	code := -1
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	}
	return out, &RunError{Command: line, ExitCode: code, Output: out, Err: err}
}

// ExitCode is the exit status of a failed command run by a Runner, or -1
// when err is not a *RunError or the program did not exit normally.
func ExitCode(err error) int {
	var re *RunError
	if errors.As(err, &re) {
		return re.ExitCode
	}
	return -1
}
