package sshgate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/cmdmode"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
)

// Command mode: `ssh gpuaas@gateway alloc list` runs a gpuaas command for
// the certificate's user, on a fresh command tree per session whose
// streams are the session.
//
// The commands call the API, and the API knows a caller only by a bearer
// token. When the client sends its own session token (SendEnv
// GPUAAS_TOKEN) and controld confirms it is the certificate's user's, the
// gateway uses it. Otherwise it exchanges the certificate the user
// authenticated with for a delegated session (gate.user_token): controld
// re-verifies the certificate, and the session ends with it or after 15
// minutes, and can mint no credentials nor reach ops.* or gate.*.

// Environment a client may send for command mode.
const (
	envToken   = "GPUAAS_TOKEN"
	envProject = "GPUAAS_PROJECT"
)

// sshContext names the in-memory config context of a command session.
const sshContext = "ssh"

// sshCommand is the ssh command line that reaches this gateway as user,
// with OpenSSH's options opts before the target.
func (g *Gateway) sshCommand(user, opts string) string {
	gw, err := sshconfig.ParseGateway(g.cfg.Advertise)
	if g.cfg.Advertise == "" || err != nil {
		gw = sshconfig.Gateway{Host: "<gateway>", Port: sshconfig.DefaultPort}
	}
	line := gw.SSHCommand(user)
	if opts != "" {
		line = "ssh " + opts + strings.TrimPrefix(line, "ssh")
	}
	return line
}

// serverURL is the NATS server the gateway's client is connected to,
// without credentials: the server commands over SSH really talk to.
func (g *Gateway) serverURL() string {
	nc := g.cfg.Client.Conn()
	if nc == nil {
		return ""
	}
	raw := nc.ConnectedUrlRedacted()
	if raw == "" { // between reconnects: the server it was given
		if servers := nc.Servers(); len(servers) > 0 {
			raw = servers[0]
		}
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return raw
}

// errActAsUserUnavailable is command mode's answer when it cannot act as
// the user: the certificate that authenticated is not at hand.
var errActAsUserUnavailable = &api.Error{
	Code:    api.CodeUnavailable,
	Message: "gpuaas commands over SSH cannot act as you: the gateway cannot tell which certificate you authenticated with",
	Hint: "run the command with the local gpuaas CLI, or pass your session token: " +
		"GPUAAS_TOKEN=<token> ssh -o SendEnv=GPUAAS_TOKEN gpuaas@<gateway> <command>",
}

// commandSession runs one gpuaas command for id.
func (g *Gateway) commandSession(s ssh.Session, id sshcert.Identity) {
	if s.Subsystem() != "" {
		fail(s, fmt.Errorf("subsystem %s needs an allocation: sftp <allocation-id>@gateway", s.Subsystem()))
		return
	}
	if g.cfg.Commands == nil {
		fail(s, errors.New("command mode is off on this gateway"))
		return
	}
	if err := g.confirmLogin(s.Context(), id); err != nil {
		fail(s, err)
		return
	}
	pty, hasPty := g.ptyOf(s)
	env := environ(s.Environ())
	cs := &cmdmode.Session{SSH: s, Out: s, ErrOut: s.Stderr(), Args: s.Command(), Now: g.cfg.Now}
	if hasPty {
		// The client's terminal is in raw mode: a bare "\n" would not
		// return the carriage.
		cs.Pty, cs.Out, cs.ErrOut = &pty, ssh.NewPtyWriter(cs.Out), ssh.NewPtyWriter(cs.ErrOut)
	}
	_, noColor := env["NO_COLOR"]
	cs.NoColor = noColor || env["TERM"] == "dumb"
	// An in-memory config with no path: nothing a command does can write
	// the gateway's files (Save fails without a path). Its server is the
	// one the gateway talks to, and its gateway this one, so that commands
	// report where they really run.
	cs.Config = sync.OnceValues(func() (*clientconfig.Config, error) {
		return &clientconfig.Config{CurrentContext: sshContext, Contexts: map[string]clientconfig.Context{
			sshContext: {UserID: id.UserID, User: id.KeyID, Server: g.serverURL(), Gateway: g.cfg.Advertise},
		}}, nil
	})
	// The session's environment, not the gateway's, stands for the user's:
	// GPUAAS_PROJECT if the client sent it (SendEnv).
	cs.Env = func() clientconfig.Overrides { return clientconfig.Overrides{Project: env[envProject]} }
	cs.Client = func(project string) (*api.Client, error) { return g.clientFor(s, id, env[envToken], project) }
	if len(cs.Args) == 0 && hasPty && g.cfg.TUI != nil {
		_ = s.Exit(g.cfg.TUI(cs))
		return
	}
	if len(cs.Args) == 0 {
		// No PTY (or no dashboard): say who the user is and what works.
		_, _ = fmt.Fprintf(cs.Out, "Signed in as %s (%s). Run gpuaas commands here: %s <command>, e.g. `alloc list`; %s gives the dashboard.\n\n",
			id.UserID, id.KeyID, g.sshCommand(CommandUser, ""), g.sshCommand(CommandUser, "-t"))
		cs.Args = []string{"--help"}
	}
	_ = s.Exit(g.cfg.Commands(cs))
}

// clientFor returns an API client acting as id: with the session token the
// client sent, once controld confirms it is id's; without one, with a
// delegated session controld opens for the certificate that authenticated.
func (g *Gateway) clientFor(s ssh.Session, id sshcert.Identity, token, project string) (*api.Client, error) {
	ctx := s.Context()
	if token == "" {
		return g.delegatedClient(s, id, project)
	}
	c := g.cfg.Client.With(api.WithToken(token), api.WithProject(project))
	who, err := c.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	// A token (docs/tokens.md) acts as itself, in its project: the
	// certificate's user may use the tokens they made.
	if who.User.ID != id.UserID && (who.Token == nil || who.Token.CreatedBy != id.UserID) {
		g.log.Warn("command mode: token of another user", "cert_user", id.UserID, "token_user", who.User.ID)
		return nil, &api.Error{Code: api.CodeForbidden, Message: "the token in " + envToken + " is not your certificate's user's"}
	}
	return c, nil
}

// delegatedClient asks controld for a delegated session for id on the
// strength of the certificate the connection authenticated with. The
// context's public key is the last one the handler accepted; it is used
// only when it is the very certificate the identity was verified from and
// confirmed for (sshcert.FingerprintMatches), and controld re-verifies it.
func (g *Gateway) delegatedClient(s ssh.Session, id sshcert.Identity, project string) (*api.Client, error) {
	key := s.PublicKey()
	perms := s.Permissions()
	if key == nil || perms.Permissions == nil || !sshcert.FingerprintMatches(perms.Permissions, key) {
		return nil, errActAsUserUnavailable
	}
	resp, err := gateproto.GateUserToken(s.Context(), g.cfg.Client, gateproto.GateUserTokenRequest{UserID: id.UserID,
		Certificate: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key)))})
	if err != nil {
		return nil, fmt.Errorf("get a session for your certificate: %w", err)
	}
	if resp.User.ID != id.UserID {
		return nil, fmt.Errorf("get a session for your certificate: controld answered for %s", resp.User.ID)
	}
	return g.cfg.Client.With(api.WithToken(resp.Token), api.WithProject(project)), nil
}

// environ turns "k=v" pairs into a map; later pairs win.
func environ(kvs []string) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
