package term

import (
	"log/slog"
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
// both targets: x11-req, break and any other request are refused, pty-req
// needs the permit-pty extension, auth-agent-req@openssh.com (ssh -A) the
// permit-agent-forwarding one, env is filtered, and sftp is the only
// subsystem.
func sessionRequestAllowed(c *conn, req *gossh.Request) bool {
	switch req.Type {
	case "shell", "exec", "window-change", "signal":
		return true
	case "pty-req":
		return c.permits(sshcert.ExtensionPermitPTY)
	case sshwire.AgentRequest:
		return c.permits(sshcert.ExtensionPermitAgentForwarding)
	case "env":
		var m sshwire.EnvMsg
		return gossh.Unmarshal(req.Payload, &m) == nil && allowedEnv(m.Name, m.Value)
	case "subsystem":
		var m sshwire.SubsystemMsg
		return gossh.Unmarshal(req.Payload, &m) == nil && m.Name == "sftp"
	}
	return false
}

// logRefused logs a session request the server refused: env by the
// variable's name (never its value) and forwarding requests at Info, as
// a user asked for them and may wonder; the rest at Debug.
func logRefused(log *slog.Logger, req *gossh.Request, attrs ...any) {
	attrs = append([]any{"type", req.Type}, attrs...)
	switch req.Type {
	case "env":
		var m sshwire.EnvMsg
		if gossh.Unmarshal(req.Payload, &m) == nil {
			attrs = append(attrs, "name", truncate(m.Name, 64))
		}
	case "auth-agent-req@openssh.com", "x11-req":
	default:
		log.Debug("terminal request refused", attrs...)
		return
	}
	log.Info("terminal request refused", attrs...)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
