// Package sshconfig renders the OpenSSH client files of a CLI context (its
// config and known_hosts, see RenderConfig and RenderKnownHosts), parses
// gateway addresses, and adds the Include line to ~/.ssh/config. The
// `gpuaas ssh-config` command (cli/sshconfig) writes them; the gateway
// reads the names they share (CommandUser, Gateway).
package sshconfig

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
)

// CommandUser is the SSH user name the alias uses by default: the gateway
// serves the dashboard and gpuaas commands to any name that is not an
// allocation id, and this one says so (sshgate.CommandUser).
const CommandUser = "gpuaas"

// AllocPattern matches allocation ids as SSH user names.
const AllocPattern = ids.Allocation + "-*"

// VolumePattern matches volume ids as SSH user names: `sftp <volume-id>@<gateway host>`
// (docs/volumes.md, "Data without a GPU").
const VolumePattern = "vol-*"

// DefaultPort is the SSH port assumed when a gateway address has none.
const DefaultPort = 22

// Gateway is the address users ssh to.
type Gateway struct {
	Host string
	Port int
}

// hostRE is what a gateway host may look like: a DNS name or an IP
// address. Anything else could smuggle ssh_config syntax or patterns.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9_:][A-Za-z0-9._:-]*$`)

// ParseGateway reads "host:port", "[ipv6]:port" or a bare host (port 22).
func ParseGateway(s string) (Gateway, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		var addrErr *net.AddrError
		if !errors.As(err, &addrErr) || !strings.Contains(addrErr.Err, "missing port") {
			return Gateway{}, fmt.Errorf("gateway %q: want host:port", s)
		}
		host, portStr = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), strconv.Itoa(DefaultPort)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return Gateway{}, fmt.Errorf("gateway %q: bad port %q", s, portStr)
	}
	if !hostRE.MatchString(host) {
		return Gateway{}, fmt.Errorf("gateway %q: bad host %q", s, host)
	}
	return Gateway{Host: host, Port: port}, nil
}

// String is the address as "host:port".
func (g Gateway) String() string { return net.JoinHostPort(g.Host, strconv.Itoa(g.Port)) }

// SSHCommand is the OpenSSH command line that reaches the gateway as
// user ("ssh user@host", with -p when the port is not 22), for messages
// and the dashboard.
func (g Gateway) SSHCommand(user string) string {
	target := g.Host
	if user != "" {
		target = user + "@" + g.Host
	}
	if g.Port != DefaultPort && g.Port != 0 {
		return "ssh -p " + strconv.Itoa(g.Port) + " " + target
	}
	return "ssh " + target
}

// KnownHostsPattern is how OpenSSH names the gateway in known_hosts:
// "host" on port 22, "[host]:port" otherwise.
func (g Gateway) KnownHostsPattern() string {
	if g.Port == DefaultPort {
		return g.Host
	}
	return "[" + g.Host + "]:" + strconv.Itoa(g.Port)
}

// Alias is the ssh_config Host name of a context's gateway:
// `ssh <alloc-id>@gpuaas-<context>`.
func Alias(contextName string) string { return "gpuaas-" + sshkeys.DirName(contextName) }

// Params are what a context's config says.
type Params struct {
	Context string
	Server  string
	Gateway Gateway
	Paths   sshkeys.Paths
}

// RenderConfig returns the Include-able OpenSSH config: a Host block for
// the context's alias and a Match block for `<alloc-id>@<gateway host>`,
// each with the key, the certificate and the known_hosts file trusting
// the gateway's host CA. The alias is the gateway itself too: its user is
// CommandUser, so `ssh gpuaas-dev` gets the dashboard and
// `ssh gpuaas-dev alloc list` runs a command, while
// `ssh <alloc-id>@gpuaas-dev` opens an allocation. The Match block applies
// to allocation ids, workload ids and CommandUser only (`ssh gpuaas@<gateway host>`, what
// the gateway's messages show), so plain `ssh <gateway host>` (often
// localhost) is left alone.
func RenderConfig(p Params) ([]byte, error) {
	var paths [3]string
	for i, path := range []string{p.Paths.Key, p.Paths.Cert, p.Paths.KnownHosts} {
		q, err := configPath(path)
		if err != nil {
			return nil, err
		}
		paths[i] = q
	}
	include, err := IncludeLine(p.Paths.Config)
	if err != nil {
		return nil, err
	}
	alias := Alias(p.Context)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# OpenSSH client config for gpuaas context %q (%s).\n", p.Context, p.Server)
	fmt.Fprintf(&b, "# Written by `gpuaas ssh-config`, which rewrites it; do not edit.\n")
	fmt.Fprintf(&b, "# Use it from the top of ~/.ssh/config, before any Host or Match line:\n")
	fmt.Fprintf(&b, "#   %s\n", include)
	fmt.Fprintf(&b, "# then: ssh <alloc-id>@%s  or  ssh <alloc-id>@%s   (a shell on an allocation)\n", p.Gateway.Host, alias)
	fmt.Fprintf(&b, "#       ssh %s   (the dashboard)   ssh %s alloc list   (any gpuaas command)\n", alias, alias)

	fmt.Fprintf(&b, "\nHost %s\n", alias)
	fmt.Fprintf(&b, "    HostName %s\n", p.Gateway.Host)
	// A default only: <alloc-id>@alias still names the allocation.
	fmt.Fprintf(&b, "    User %s\n", CommandUser)
	writeCommon(&b, p.Gateway.Port, paths)

	fmt.Fprintf(&b, "\nMatch host %s user %s,%s,%s,%s\n", p.Gateway.Host, AllocPattern, WorkloadPattern, VolumePattern, CommandUser)
	writeCommon(&b, p.Gateway.Port, paths)
	return b.Bytes(), nil
}

func writeCommon(b *bytes.Buffer, port int, paths [3]string) {
	fmt.Fprintf(b, "    Port %d\n", port)
	fmt.Fprintf(b, "    IdentityFile %s\n", paths[0])
	fmt.Fprintf(b, "    CertificateFile %s\n", paths[1])
	fmt.Fprintf(b, "    IdentitiesOnly yes\n")
	fmt.Fprintf(b, "    PreferredAuthentications publickey\n")
	fmt.Fprintf(b, "    UserKnownHostsFile %s\n", paths[2])
	fmt.Fprintf(b, "    StrictHostKeyChecking yes\n")
	fmt.Fprintf(b, "    CheckHostIP no\n")
	fmt.Fprintf(b, "    UpdateHostKeys no\n")
}

// configPath quotes a path for ssh_config. IdentityFile, CertificateFile
// and UserKnownHostsFile expand %-tokens, so '%' is doubled. A quote,
// backslash or line break has no portable spelling there and is refused.
func configPath(path string) (string, error) {
	if strings.ContainsAny(path, "\"\\\r\n") {
		return "", fmt.Errorf("path %q cannot be written in an OpenSSH config: set %s to a simpler directory", path, "GPUAAS_CONFIG_DIR")
	}
	return `"` + strings.ReplaceAll(path, "%", "%%") + `"`, nil
}

// IncludeLine is the line to add to ~/.ssh/config. Include does not
// expand %-tokens, so the path is only quoted.
func IncludeLine(configFile string) (string, error) {
	if strings.ContainsAny(configFile, "\"\\\r\n") {
		return "", fmt.Errorf("path %q cannot be written in an OpenSSH config: set %s to a simpler directory", configFile, "GPUAAS_CONFIG_DIR")
	}
	if strings.ContainsAny(configFile, " \t") {
		return `Include "` + configFile + `"`, nil
	}
	return "Include " + configFile, nil
}

// RenderKnownHosts returns one `@cert-authority` line per host CA key
// (several during a rotation), trusting host certificates they sign for
// the gateway.
func RenderKnownHosts(g Gateway, hostCAs []string) ([]byte, error) {
	if len(hostCAs) == 0 {
		return nil, ErrNoHostCA
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Host CA of the gpuaas gateway, written by `gpuaas ssh-config`; do not edit.\n")
	for _, line := range hostCAs {
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("host CA key %q: %w", line, err)
		}
		if _, ok := key.(*ssh.Certificate); ok {
			return nil, fmt.Errorf("host CA key %q: a certificate is not a CA key", line)
		}
		fmt.Fprintf(&b, "@cert-authority %s %s gpuaas-host-ca\n", g.KnownHostsPattern(), bytes.TrimSpace(ssh.MarshalAuthorizedKey(key)))
	}
	return b.Bytes(), nil
}
