package term

import (
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshwire"
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
		var m sshwire.EnvMsg
		return gossh.Unmarshal(req.Payload, &m) == nil && allowedEnv(m.Name, m.Value)
	case "subsystem":
		var m sshwire.SubsystemMsg
		return gossh.Unmarshal(req.Payload, &m) == nil && m.Name == "sftp"
	}
	return false
}
