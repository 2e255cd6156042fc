package term

import (
	"strings"
	"syscall"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Payloads of session requests (RFC 4254 section 6).
type (
	ptyRequestMsg struct {
		Term    string
		Columns uint32
		Rows    uint32
		Width   uint32
		Height  uint32
		Modes   string
	}
	windowChangeMsg struct {
		Columns uint32
		Rows    uint32
		Width   uint32
		Height  uint32
	}
	envMsg struct {
		Name  string
		Value string
	}
	execMsg struct {
		Command string
	}
	subsystemMsg struct {
		Name string
	}
	signalMsg struct {
		Signal string
	}
	exitStatusMsg struct {
		Status uint32
	}
	exitSignalMsg struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}
)

// Limits on what a client may make the server keep for a session.
const (
	maxEnv      = 64
	maxEnvValue = 4096
)

// allowedEnv is the env allow-list: TERM, LANG and LC_* (LC_ followed by
// upper-case letters and underscores), like OpenSSH's default AcceptEnv.
func allowedEnv(name, value string) bool {
	if len(value) > maxEnvValue || strings.ContainsRune(value, 0) {
		return false
	}
	if name == "TERM" || name == "LANG" {
		return true
	}
	rest, ok := strings.CutPrefix(name, "LC_")
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}

// sessionRequestAllowed is the allow-list of session requests, shared by
// both targets: x11-req, auth-agent-req@openssh.com, break and any other
// request are refused, pty-req needs the permit-pty extension, env is
// filtered, and sftp is the only subsystem.
func sessionRequestAllowed(c *conn, req *gossh.Request) bool {
	switch req.Type {
	case "shell", "exec", "window-change", "signal":
		return true
	case "pty-req":
		return c.permits(sshcert.ExtensionPermitPTY)
	case "env":
		var m envMsg
		return gossh.Unmarshal(req.Payload, &m) == nil && allowedEnv(m.Name, m.Value)
	case "subsystem":
		var m subsystemMsg
		return gossh.Unmarshal(req.Payload, &m) == nil && m.Name == "sftp"
	}
	return false
}

// signals maps SSH signal names (RFC 4254 6.10) to the host's.
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// signalName is the SSH name of sig, for exit-signal; "" when SSH has none.
func signalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return name
		}
	}
	return ""
}
