package term

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/workload"
)

// Sessions in a workload's container (ssh <workload-id>@gateway,
// docs/apps.md). controld names the workload in the ticket
// (sshcert.OptionWorkload) only for a running workload of the allocation
// the ticket is for; hostd then runs every session's program through
// `podman exec` in that container, as the allocation's POSIX user with
// the user's own rootless podman — which sees that user's containers
// only, so no ticket reaches another allocation's container whatever it
// names. Port forwards stay the allocation's (the containers share the
// host's network: docs/decisions/0021-workloads-on-the-node.md).

// ErrWorkloadTarget: a ticket names a workload hostd cannot enter (a bad
// id, or an allocation whose processes hostd does not run itself).
var ErrWorkloadTarget = errors.New("cannot enter the workload")

// sftpRefusal is what an sftp (or scp, which speaks sftp) client is told.
const sftpRefusal = "gpuaas: sftp and scp into a workload are not supported: use the allocation " +
	"(sftp <allocation-id>@gateway) or pipe through the container, as in " +
	"ssh <workload-id>@gateway 'cat > FILE' < FILE"

// workloadTarget wraps the allocation's exec target so that its sessions
// run in the workload's container.
func workloadTarget(t *execTarget, id string) (target, error) {
	if err := workload.CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkloadTarget, err)
	}
	t.env = containerEnv{Environment: t.env, container: workload.ContainerName(id)}
	return t, nil
}

// containerEnv is an allocation's environment whose programs run in one
// of its containers; everything else (loopback dials, forwards) is the
// allocation's.
type containerEnv struct {
	env.Environment
	container string
}

// Exec runs spec's program in the container: the shell, or the command
// through the image's /bin/sh (as OpenSSH runs it through the user's
// shell), with a terminal when asked; podman exec passes the exit status
// back. The client's environment (the gateway's allow-list) is passed in.
func (c containerEnv) Exec(ctx context.Context, spec env.ExecSpec) (env.Process, error) {
	if spec.Subsystem != "" {
		// Refused in words the client shows, not as a failed request.
		spec.Subsystem, spec.PTY = "", nil
		spec.Argv = []string{"sh", "-c", `printf '%s\n' "$1" >&2; exit 1`, "sh", sftpRefusal}
		return c.Environment.Exec(ctx, spec)
	}
	spec.Argv = podmanExecArgv(c.container, spec)
	spec.Command = ""
	// A forwarded agent's socket is the host's: not inside the container.
	spec.AgentSocket = ""
	return c.Environment.Exec(ctx, spec)
}

// containerShell is the shell of a session without a command: bash when the
// image has it, else sh.
const containerShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

// podmanExecArgv is the podman command that runs spec in container.
func podmanExecArgv(container string, spec env.ExecSpec) []string {
	argv := []string{"podman", "--runtime", "runc", "exec", "-i"}
	if spec.PTY != nil {
		argv = append(argv, "-t")
		if spec.PTY.Term != "" {
			argv = append(argv, "-e", "TERM="+spec.PTY.Term)
		}
	}
	for _, kv := range spec.Env {
		argv = append(argv, "-e", kv)
	}
	command := spec.Command
	if command == "" {
		command = containerShell
	}
	return append(argv, container, "/bin/sh", "-c", command)
}
