package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
)

// Labels every container carries, naming its allocation and workload.
const (
	LabelAllocation = "gpuaas.allocation"
	LabelWorkload   = "gpuaas.workload"
)

// ErrNotTenant refuses to run podman for an account that is hostd itself
// (a sim without system users): it would be rootful podman, outside
// every tenant's isolation.
var ErrNotTenant = errors.New("workloads need the allocation's own POSIX user")

// Podman runs rootless podman as an allocation's user through its
// environment (hostd/env: the user's credential, isolation and cgroup),
// with runc (crun refuses hybrid cgroups) and host networking
// (slirp4netns cannot open /dev/net/tun here): docs/apps.md.
type Podman struct {
	Env hostenv.Environment
}

// Open checks that e runs processes as a user of its own.
func Open(e hostenv.Environment) (Podman, error) {
	if a, ok := hostenv.AccountOf(e); ok && (a.Credential == nil || a.Credential.Uid == 0) {
		return Podman{}, fmt.Errorf("podman as %s: %w", a.Name, ErrNotTenant)
	}
	return Podman{Env: e}, nil
}

// maxOutput bounds what is kept of one podman command's output.
const maxOutput = 256 << 10

// Result is one podman command's outcome.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Err is nil for exit 0, else an error naming op with podman's message.
func (r Result) Err(op string) error {
	if r.Code == 0 {
		return nil
	}
	msg := strings.TrimSpace(r.Stderr)
	if lines := strings.Split(msg, "\n"); len(lines) > 3 {
		msg = strings.Join(lines[len(lines)-3:], "\n")
	}
	return fmt.Errorf("%s: podman exited %d: %s", op, r.Code, msg)
}

// Run runs podman with args (stdin, when not nil, is its input).
func (p Podman) Run(ctx context.Context, stdin io.Reader, args ...string) (Result, error) {
	return p.shell(ctx, stdin, "exec podman --runtime runc "+quoteArgs(args))
}

func (p Podman) shell(ctx context.Context, stdin io.Reader, command string) (Result, error) {
	var out, errb limitedBuffer
	proc, err := p.Env.Exec(ctx, hostenv.ExecSpec{Command: command, Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err != nil {
		return Result{}, fmt.Errorf("podman: %w", err)
	}
	done := make(chan hostenv.ExitStatus, 1)
	go func() { done <- proc.Wait() }()
	var st hostenv.ExitStatus
	select {
	case st = <-done:
	case <-ctx.Done():
		proc.Signal(9)
		<-done
		return Result{}, fmt.Errorf("podman: %w", ctx.Err())
	}
	code := st.Code
	if st.Signal != 0 {
		code = 128 + int(st.Signal)
	}
	return Result{Code: code, Stdout: out.String(), Stderr: errb.String()}, nil
}

// limits are the user's hard RLIMIT_NOFILE and RLIMIT_NPROC (podman may
// not raise a container's above them, so they are what it is given) and
// whether its storage has the image.
type limits struct {
	nofile, nproc uint64
	hasImage      bool
	home          string // the user's $HOME (Spec.HomeWorkdir)
}

// prepare reads the limits and looks for image id in one shell.
func (p Podman) prepare(ctx context.Context, id string) (limits, error) {
	r, err := p.shell(ctx, nil, "ulimit -Hn; ulimit -Hu; podman --runtime runc image exists "+quoteArgs([]string{id})+"; echo $?; printf '%s\\n' \"$HOME\"")
	if err != nil {
		return limits{}, err
	}
	if err := r.Err("prepare"); err != nil {
		return limits{}, err
	}
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if len(lines) != 4 {
		return limits{}, fmt.Errorf("prepare: unexpected output %q (%s)", r.Stdout, strings.TrimSpace(r.Stderr))
	}
	f := []string{strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1]), strings.TrimSpace(lines[2])}
	home := lines[3]
	nofile, nproc, err := parseLimits(f[0], f[1])
	if err != nil {
		return limits{}, err
	}
	switch f[2] {
	case "0":
		return limits{nofile, nproc, true, home}, nil
	case "1":
		return limits{nofile, nproc, false, home}, nil
	}
	return limits{}, fmt.Errorf("image exists %s: podman exited %s: %s", id, f[2], strings.TrimSpace(r.Stderr))
}

func parseLimits(n, u string) (nofile, nproc uint64, err error) {
	f := []string{n, u}
	parse := func(s string) (uint64, error) {
		if s == "unlimited" {
			return 1 << 20, nil
		}
		return strconv.ParseUint(s, 10, 64)
	}
	if nofile, err = parse(f[0]); err != nil {
		return 0, 0, fmt.Errorf("ulimit: %w", err)
	}
	if nproc, err = parse(f[1]); err != nil {
		return 0, 0, fmt.Errorf("ulimit: %w", err)
	}
	return nofile, nproc, nil
}

// ImageExists reports whether the user's storage has image id.
func (p Podman) ImageExists(ctx context.Context, id string) (bool, error) {
	r, err := p.Run(ctx, nil, "image", "exists", id)
	if err != nil {
		return false, err
	}
	return r.Code == 0, nil
}

// Load streams a cached image into the user's storage (`podman load`).
func (p Podman) Load(ctx context.Context, e Entry) error {
	pr, pw := io.Pipe()
	var werr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		werr = e.Archive(pw)
		pw.CloseWithError(werr)
	}()
	r, err := p.Run(ctx, pr, "load", "--quiet")
	pr.CloseWithError(io.EOF)
	wg.Wait()
	if err != nil {
		return err
	}
	if err := r.Err("load " + e.Digest); err != nil {
		return err
	}
	if werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return werr
	}
	return nil
}

// Container is what `podman inspect` says of a container.
type Container struct {
	ID    string `json:"Id"`
	Image string `json:"Image"`
	State struct {
		Status     string    `json:"Status"`
		ExitCode   int       `json:"ExitCode"`
		OOMKilled  bool      `json:"OOMKilled"`
		StartedAt  time.Time `json:"StartedAt"`
		FinishedAt time.Time `json:"FinishedAt"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig struct {
		LogConfig struct {
			Type string `json:"Type"`
			Path string `json:"Path"`
		} `json:"LogConfig"`
	} `json:"HostConfig"`
}

// Inspect returns the container named name; found is false when there
// is none.
func (p Podman) Inspect(ctx context.Context, name string) (c Container, found bool, err error) {
	r, err := p.Run(ctx, nil, "container", "inspect", "--format", "json", name)
	if err != nil {
		return Container{}, false, err
	}
	if r.Code != 0 {
		if strings.Contains(r.Stderr, "no such container") {
			return Container{}, false, nil
		}
		return Container{}, false, r.Err("inspect " + name)
	}
	var cs []Container
	if err := json.Unmarshal([]byte(r.Stdout), &cs); err != nil || len(cs) != 1 {
		return Container{}, false, fmt.Errorf("inspect %s: unexpected output (%v)", name, err)
	}
	return cs[0], true, nil
}

// LastLines returns the container's last n log lines (stdout and stderr).
func (p Podman) LastLines(ctx context.Context, name string, n int) ([]string, error) {
	var out limitedBuffer
	proc, err := p.Env.Exec(ctx, hostenv.ExecSpec{
		Command: "exec podman --runtime runc " + quoteArgs([]string{"logs", "--tail", strconv.Itoa(n), name}),
		Stdout:  &out, Stderr: &out})
	if err != nil {
		return nil, fmt.Errorf("logs %s: %w", name, err)
	}
	if st := proc.Wait(); st.Code != 0 || st.Signal != 0 {
		return nil, fmt.Errorf("logs %s: podman exited %d: %s", name, st.Code, strings.TrimSpace(out.String()))
	}
	text := strings.TrimRight(out.String(), "\n")
	if text == "" {
		return nil, nil
	}
	return strings.Split(text, "\n"), nil
}

// quoteArgs quotes each argument for the user's POSIX shell.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if safeArg.MatchString(a) {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

var safeArg = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// limitedBuffer keeps the first maxOutput bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
