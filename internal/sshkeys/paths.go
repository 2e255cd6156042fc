// Package sshkeys keeps a config context's SSH identity: an ed25519 key,
// generated once and never replaced, and a short-lived user certificate for
// it that controld signs (auth.ssh_cert) and the CLI renews before it
// expires.
//
// Everything lives in <config dir>/ssh/<context>/ (mode 0700):
//
//	id_ed25519           the private key (0600)
//	id_ed25519.pub       its public half
//	id_ed25519-cert.pub  the certificate (removed by `gpuaas logout`)
//	config, known_hosts  written by `gpuaas ssh-config` (cli/sshconfig)
package sshkeys

import (
	"fmt"
	"path/filepath"
	"strings"
)

// File names inside a context's SSH directory.
const (
	KeyFile        = "id_ed25519"
	PublicKeyFile  = "id_ed25519.pub"
	CertFile       = "id_ed25519-cert.pub"
	ConfigFile     = "config"
	KnownHostsFile = "known_hosts"
)

// Paths are the files of one context's SSH identity.
type Paths struct {
	Dir        string
	Key        string
	PublicKey  string
	Cert       string
	Config     string
	KnownHosts string
}

// For returns the paths of contextName's identity under configDir.
func For(configDir, contextName string) Paths {
	dir := filepath.Join(configDir, "ssh", DirName(contextName))
	return Paths{
		Dir:        dir,
		Key:        filepath.Join(dir, KeyFile),
		PublicKey:  filepath.Join(dir, PublicKeyFile),
		Cert:       filepath.Join(dir, CertFile),
		Config:     filepath.Join(dir, ConfigFile),
		KnownHosts: filepath.Join(dir, KnownHostsFile),
	}
}

// DirName turns a context name into one safe path element (and a safe
// ssh_config Host name): letters, digits, '.', '_' and '-' are kept, any
// other byte (and a leading '.') becomes "+xx" in hex. Distinct names give
// distinct directories, and "../x" cannot climb out of the ssh directory.
func DirName(contextName string) string {
	if contextName == "" {
		return "+"
	}
	var b strings.Builder
	for i := 0; i < len(contextName); i++ {
		c := contextName[i]
		keep := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || (c == '.' && i > 0)
		if keep {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "+%02x", c)
	}
	return b.String()
}
