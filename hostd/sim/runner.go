package sim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// ErrUnknownCommand is the sim Runner's answer to a program it does not
// simulate.
var ErrUnknownCommand = errors.New("sim: command not simulated")

// Runner is the sim host.Runner. It records every command and simulates
// the few the tasks run: cloud-localds, qemu-img create and blkdiscard,
// and the nvidia-smi query of hostd/gpumon (gpus.go), which is answered
// but not recorded (hostd runs it every few seconds).
// FailCommand makes a program fail as a real one would.
type Runner struct {
	// mu protects the following.
	mu    sync.Mutex
	calls [][]string
	fail  map[string]string
	// gpus and gpuDir answer nvidia-smi (gpus.go).
	gpus   []simGPU
	gpuDir string
	tree   string // the sim tree, for the GPUs' drivers
	model  string // the GPUs' model, for the nvidia-smi scripts
}

var _ host.Runner = (*Runner)(nil)

// NewRunner returns a Runner with no calls recorded.
func NewRunner() *Runner { return &Runner{} }

// FailCommand makes every later run of the program name fail with exit
// status 1 and message as its output.
func (r *Runner) FailCommand(name, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail == nil {
		r.fail = map[string]string{}
	}
	r.fail[name] = message
}

// ClearFailures undoes FailCommand.
func (r *Runner) ClearFailures() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = nil
}

// Calls returns every command run so far, name first.
func (r *Runner) Calls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]string, len(r.calls))
	for i, c := range r.calls {
		out[i] = slices.Clone(c)
	}
	return out
}

// Run records the command and simulates it.
func (r *Runner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	if name != "nvidia-smi" {
		r.calls = append(r.calls, append([]string{name}, args...))
	}
	msg, fail := r.fail[name]
	r.mu.Unlock()
	line := strings.Join(append([]string{name}, args...), " ")
	failed := func(code int, out string, err error) ([]byte, error) {
		return []byte(out), &host.RunError{Command: line, ExitCode: code, Output: []byte(out), Err: err}
	}
	if err := ctx.Err(); err != nil {
		return failed(-1, "", err)
	}
	if fail {
		return failed(1, msg, errors.New("exit status 1"))
	}
	var err error
	switch name {
	case "nvidia-smi":
		out, err := r.nvidiaSMI(args)
		if err != nil {
			return failed(6, err.Error(), errors.New("exit status 6"))
		}
		return out, nil
	case "cloud-localds":
		err = cloudLocalds(args)
	case "qemu-img":
		err = qemuImg(args)
	case "blkdiscard":
		err = blkdiscard(args)
	default:
		return failed(-1, "", fmt.Errorf("%w: %s", ErrUnknownCommand, name))
	}
	if err != nil {
		return failed(1, name+": "+err.Error(), errors.New("exit status 1"))
	}
	return nil, nil
}

// splitArgs separates options that take a value (given as "--opt v",
// "--opt=v" or "-o v") from positional arguments.
func splitArgs(args []string, withValue ...string) (opts map[string]string, pos []string, err error) {
	opts = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
			opts[k] = v
			continue
		}
		if slices.Contains(withValue, a) {
			if i+1 == len(args) {
				return nil, nil, fmt.Errorf("option %s needs a value", a)
			}
			opts[a] = args[i+1]
			i++
			continue
		}
		opts[a] = ""
	}
	return opts, pos, nil
}

// cloudLocalds simulates `cloud-localds [--network-config F] OUT USERDATA
// [METADATA]`: OUT becomes a small stand-in for the ISO naming the
// checksums of its inputs, which stay where they are (the sim hypervisor
// reads user-data from beside the seed).
func cloudLocalds(args []string) error {
	opts, pos, err := splitArgs(args, "--network-config", "-N", "--disk-format", "-d", "--filesystem", "-f")
	if err != nil {
		return err
	}
	if len(pos) < 2 || len(pos) > 3 {
		return errors.New("usage: cloud-localds [options] output user-data [meta-data]")
	}
	inputs := pos[1:]
	for _, k := range []string{"--network-config", "-N"} {
		if f, ok := opts[k]; ok {
			inputs = append(inputs, f)
		}
	}
	var b strings.Builder
	b.WriteString("gpuaas sim NoCloud seed (cidata)\n")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), in)
	}
	return os.WriteFile(pos[0], []byte(b.String()), 0o644)
}

// qemuImg simulates `qemu-img create [-f fmt] [-F fmt] [-b base] path
// [size]`: the backing file must exist, and path becomes a small file.
func qemuImg(args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("only 'create' is simulated")
	}
	opts, pos, err := splitArgs(args[1:], "-f", "-F", "-b", "-o")
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return errors.New("usage: qemu-img create [-f fmt] [-F backing_fmt] [-b backing_file] filename [size]")
	}
	base, hasBase := opts["-b"]
	if !hasBase && len(pos) < 2 {
		return errors.New("size or backing file required")
	}
	if hasBase {
		if _, err := os.Stat(base); err != nil {
			return fmt.Errorf("could not open backing file: %w", err)
		}
	}
	content := fmt.Sprintf("QFI\xfb sim overlay format=%s backing=%s backing_fmt=%s\n", opts["-f"], base, opts["-F"])
	return os.WriteFile(pos[0], []byte(content), 0o644)
}

// blkdiscard accepts `blkdiscard [-f] device` and discards nothing.
func blkdiscard(args []string) error {
	_, pos, err := splitArgs(args, "-o", "--offset", "-l", "--length", "-p", "--step")
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: blkdiscard [options] device")
	}
	return nil
}
