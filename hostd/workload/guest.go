package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
)

// A slice's workloads run inside its guest (docs/apps.md, "Slices";
// docs/decisions/0047-workloads-in-slices.md): podman runs as the guest's
// user through the environment's exec (the SSH hop), the image is
// streamed in over the same hop (`podman load`, Podman.Load), and what
// bare metal gets from hostd on the node is the guest's own:
//
//   - subordinate ids: the guest's /etc/subuid and /etc/subgid, where
//     its useradd (Debian's, /etc/subuid present) gave the user a range
//     when cloud-init made it. hostd checks, and changes nothing in the
//     guest.
//   - GPUs: the guest's CDI spec, /var/run/cdi/gpuaas-<alloc>.json,
//     written by the guest's root at boot from the guest's driver
//     records. Every GPU a guest has is its slice's (passed through), so
//     the spec names no other allocation's.

// ErrNoGuestSubIDs is a guest whose user has no subordinate id range:
// rootless podman cannot run there.
var ErrNoGuestSubIDs = errors.New("the guest's user has no subordinate id range in the guest's /etc/subuid and /etc/subgid")

// ErrNoGuestGPUs is a guest without a CDI spec of its GPUs, or with
// fewer GPUs in it than the workload is to get.
var ErrNoGuestGPUs = errors.New("the guest's CDI spec does not name the allocation's GPUs")

// InGuest reports whether e is a guest of its own (a slice's VM: an SSH
// server hostd hops into) rather than an account on the node.
func InGuest(e hostenv.Environment) bool {
	_, ok := e.(hostenv.Hopper)
	return ok
}

// guestSubIDsScript prints the user's name and uid, then "uid" and "gid"
// for each of the guest's files that has a range of the user's.
const guestSubIDsScript = `u=$(id -un) && echo "$u" "$(id -u)" && ` +
	`{ grep -qs "^$u:" /etc/subuid && echo uid; grep -qs "^$u:" /etc/subgid && echo gid; true; }`

// CheckGuestSubIDs checks, inside the guest, that its user is not root
// (rootful podman: ErrNotTenant) and has subordinate uid and gid ranges.
func (p Podman) CheckGuestSubIDs(ctx context.Context) error {
	r, err := p.shell(ctx, nil, guestSubIDsScript)
	if err != nil {
		return fmt.Errorf("guest subordinate ids: %w", err)
	}
	if err := r.Err("guest subordinate ids"); err != nil {
		return err
	}
	f := strings.Fields(r.Stdout)
	if len(f) >= 2 && f[1] == "0" {
		return fmt.Errorf("podman as the guest's %s: %w", f[0], ErrNotTenant)
	}
	if len(f) == 4 && f[2] == "uid" && f[3] == "gid" {
		return nil
	}
	user := "?"
	if len(f) > 0 {
		user = f[0]
	}
	return fmt.Errorf("guest user %s: %w", user, ErrNoGuestSubIDs)
}

// maxGuestSpec bounds the guest's spec hostd reads.
const maxGuestSpec = 64 << 10

// GuestGPUs reads the guest's CDI spec of allocation allocID and returns
// the device names a container of n GPUs gets: its first n in the
// spec's order (the guest's minors, which follow the slots' order, as
// controld's GPUs do), every one when n is 0. A guest with no GPU for
// n = 0 has none to give; fewer than n is ErrNoGuestGPUs.
func (p Podman) GuestGPUs(ctx context.Context, allocID string, n int) ([]string, error) {
	path := CDISpecPath(CDIDir, allocID)
	r, err := p.shell(ctx, nil, "if [ -e "+quoteArgs([]string{path})+" ]; then head -c "+
		fmt.Sprint(maxGuestSpec)+" "+quoteArgs([]string{path})+"; fi")
	if err != nil {
		return nil, fmt.Errorf("guest gpus: %w", err)
	}
	if err := r.Err("guest gpus"); err != nil {
		return nil, err
	}
	var names []string
	if strings.TrimSpace(r.Stdout) != "" {
		var spec CDISpec
		if err := json.Unmarshal([]byte(r.Stdout), &spec); err != nil {
			return nil, fmt.Errorf("guest gpus: %s: %w", path, err)
		}
		if spec.Kind != CDIKind {
			return nil, fmt.Errorf("guest gpus: %s: kind %q; want %q", path, spec.Kind, CDIKind)
		}
		for _, d := range spec.Devices {
			names = append(names, CDIKind+"="+d.Name)
		}
	}
	switch {
	case n == 0:
		return names, nil
	case n > len(names):
		return nil, fmt.Errorf("guest gpus: %d wanted, %d in %s: %w", n, len(names), path, ErrNoGuestGPUs)
	}
	return names[:n], nil
}

// guestLimits lowers lim to the hard limits podman's own user namespace
// has: rootless podman 4.3 runs its pause process (and so every
// container's runtime) with a lower RLIMIT_NPROC than the user's shell
// (32768 against 96365 measured in a sim guest), and runc may not raise
// a container's above it ("error setting rlimit type 6: operation not
// permitted"). On bare metal the account's own RLIMIT_NPROC is lower
// still (host.Tenancy); in a guest it is the guest's.
func (p Podman) guestLimits(ctx context.Context, lim limits) (limits, error) {
	r, err := p.Run(ctx, nil, "unshare", "cat", "/proc/self/limits")
	if err != nil {
		return lim, err
	}
	if err := r.Err("guest limits"); err != nil {
		return lim, err
	}
	for _, line := range strings.Split(r.Stdout, "\n") {
		var target *uint64
		switch {
		case strings.HasPrefix(line, "Max open files"):
			target = &lim.nofile
		case strings.HasPrefix(line, "Max processes"):
			target = &lim.nproc
		default:
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		// Name (3 words for both), soft, hard, units.
		if hard, err := parseLimit(f[len(f)-2]); err == nil {
			*target = min(*target, hard)
		}
	}
	return lim, nil
}

// parseLimit reads a /proc/PID/limits value ("unlimited" is parseLimits').
func parseLimit(s string) (uint64, error) {
	n, _, err := parseLimits(s, s)
	return n, err
}

// GuestContainers runs podman args (stop --all, rm --all) for every
// container of the guest's user, when it ever ran podman there: a
// guest's storage goes with its disk, so it is not reset.
func (p Podman) GuestContainers(ctx context.Context, args ...string) error {
	r, err := p.shell(ctx, nil, `if [ -d "$HOME/.local/share/containers" ]; then exec podman --runtime runc `+quoteArgs(args)+`; fi`)
	if err != nil {
		return err
	}
	return r.Err(strings.Join(args, " "))
}
