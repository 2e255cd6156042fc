package host

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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
	// at AgentMount.
	AgentDir string `json:"agent_dir,omitempty"`
}

// Isolate turns cmd, about to be started as cred, into the helper that
// isolates it and then runs it as cred: cmd's Path, Args, Env, Dir and
// other SysProcAttr settings (Setsid, Setctty) carry through. agentSock,
// when not empty, is the session's forwarded agent socket in the node's
// /tmp; SSH_AUTH_SOCK in cmd.Env is pointed at where the session sees it.
func (iso *Isolation) Isolate(cmd *exec.Cmd, cred *syscall.Credential, agentSock string) error {
	if cred == nil || cred.Uid == 0 {
		return fmt.Errorf("%w: isolate a process of root's", ErrInvalidUser)
	}
	spec := initSpec{Isolation: *iso, UID: cred.Uid, GID: cred.Gid, Groups: cred.Groups}
	if agentSock != "" {
		spec.AgentDir = filepath.Dir(agentSock)
		seen := filepath.Join(iso.AgentMount, filepath.Base(agentSock))
		for i, kv := range cmd.Env {
			if strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
				cmd.Env[i] = "SSH_AUTH_SOCK=" + seen
			}
		}
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

// isolateSelf sets up the namespaces this process was made with and
// becomes the user.
func isolateSelf(s initSpec) error {
	if s.UID == 0 {
		return fmt.Errorf("refusing to run as root")
	}
	// Nothing mounted here reaches the node's namespace, or comes from it.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Every source is opened before anything is mounted: each may be in
	// a /tmp about to be hidden (the agent's always is). Opened without
	// following a link at the last step; the agent's directory is bound
	// only if it is the user's (the others are in root's directories).
	type bind struct {
		fd  int
		dst string
	}
	var binds []bind
	defer func() {
		for _, b := range binds {
			_ = unix.Close(b.fd)
		}
	}()
	for _, b := range []struct{ src, dst string }{{s.AgentDir, s.AgentMount}, {s.Tmp, "/tmp"}, {s.VarTmp, "/var/tmp"}} {
		if b.src == "" {
			continue
		}
		if _, err := os.Stat(b.dst); err != nil {
			continue // a node without /var/tmp
		}
		fd, err := unix.Open(b.src, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", b.src, err)
		}
		binds = append(binds, bind{fd, b.dst})
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("open %s: %w", b.src, err)
		}
		if st.Uid != s.UID {
			return fmt.Errorf("%s is not the user's", b.src)
		}
	}
	for _, b := range binds {
		if err := bindOver("/proc/self/fd/"+strconv.Itoa(b.fd), b.dst); err != nil {
			return err
		}
	}
	if _, err := os.Stat("/dev/shm"); err == nil {
		opts := fmt.Sprintf("mode=0700,uid=%d,gid=%d", s.UID, s.GID)
		if s.ShmSize > 0 {
			opts += ",size=" + strconv.FormatInt(s.ShmSize, 10)
		}
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount /dev/shm: %w", err)
		}
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(s.OOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("oom score: %w", err)
	}
	groups := make([]int, len(s.Groups))
	for i, g := range s.Groups {
		groups[i] = int(g)
	}
	// Go applies these to every thread of the process.
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(int(s.GID)); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(int(s.UID)); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	return nil
}

// bindOver binds src over dst, without set-uid programs or devices.
func bindOver(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s over %s: %w", src, dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}
