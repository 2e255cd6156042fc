package host

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// A process hostd starts as an allocation user runs in a mount namespace
// where /tmp, /var/tmp and /dev/shm are the allocation's own, and in an
// IPC namespace of its own. Go cannot run code between fork and exec, so
// the child is hostd's own binary again (/proc/self/exe) under the name
// tenantInitName: it is made with new mount and IPC namespaces, mounts,
// sets its OOM score, drops to the user and execs the program in place
// (same pid, session and terminal). The init hook below catches that
// name before main runs, in hostd and in the test binaries alike.

// tenantInitName is argv[0] of the helper.
const tenantInitName = "gpuaas-tenant-init"

func init() {
	if len(os.Args) > 1 && os.Args[0] == tenantInitName {
		os.Exit(tenantInit(os.Args[1:]))
	}
}

// initSpec is what the helper is told (its first argument, JSON).
type initSpec struct {
	Isolation
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// AgentDir is the session's agent directory in the node's /tmp, bound
	// at the same path in the session's.
	AgentDir string `json:"agent_dir,omitempty"`
	// Home is the session's working directory: kept where it is should it
	// be below /tmp or /var/tmp (a sim's data directory), and made the
	// working directory again once mounts are done.
	Home string `json:"home,omitempty"`
}

// Isolate turns cmd, about to be started as cred, into the helper that
// isolates it and then runs it as cred: cmd's Path, Args, Env, Dir and
// other SysProcAttr settings (Setsid, Setctty) carry through. agentSock,
// when not empty, is the session's forwarded agent socket in the node's
// /tmp: the session finds it at the same path.
func (iso *Isolation) Isolate(cmd *exec.Cmd, cred *syscall.Credential, agentSock string) error {
	if cred == nil || cred.Uid == 0 {
		return fmt.Errorf("%w: isolate a process of root's", ErrInvalidUser)
	}
	spec := initSpec{Isolation: *iso, UID: cred.Uid, GID: cred.Gid, Groups: cred.Groups, Home: cmd.Dir}
	if agentSock != "" {
		spec.AgentDir = filepath.Dir(agentSock)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	cmd.Args = append([]string{tenantInitName, string(b), cmd.Path}, args...)
	cmd.Path = "/proc/self/exe"
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = nil // the helper drops to cred itself
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
	return nil
}

// tenantInit is the helper: args are the spec, the program's path and its
// argv. It returns only on failure (127 as a shell does for a program it
// could not run), having said why on stderr.
func tenantInit(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "gpuaas: tenant init: missing arguments")
		return 127
	}
	var spec initSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "gpuaas: tenant init:", err)
		return 127
	}
	if err := isolateSelf(spec); err != nil {
		fmt.Fprintln(os.Stderr, "gpuaas: tenant init:", err)
		return 127
	}
	err := syscall.Exec(args[1], args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "gpuaas: exec %s: %v\n", args[1], err)
	return 127
}
