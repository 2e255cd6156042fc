package term

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// loadOrMakeKey reads an ed25519 key in OpenSSH PEM form, making it (0600)
// on first use so the terminal keeps its host key across restarts.
func loadOrMakeKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := gossh.MarshalPrivateKey(priv, "gpuaas hostd terminal")
		if err != nil {
			return nil, err
		}
		b = pem.EncodeToMemory(block)
		if err := fsutil.WriteFile(path, b, 0o600, fsutil.Synced); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	k, err := gossh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case *ed25519.PrivateKey:
		return *k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: a %T, not an ed25519 key", path, k)
}

// vmPin is what is pinned of a VM's host key: the key, and the VM key it
// was first met with. A VM provisioned again gets a new VM key, and its new
// host key is then pinned afresh.
type vmPin struct {
	VMKey   string `json:"vm_key"`   // SHA256 fingerprint of the per-VM key
	HostKey string `json:"host_key"` // authorized_keys form
}

// vmHostKeyCallback pins a VM's host key on first use, in
// StateDir/terminal/vm_host_keys/<alloc>: a real VM makes its host keys
// at first boot and nothing publishes them to hostd, so the first hop
// (moments after provisioning, on the host's own bridge) is trusted and
// any later change is refused. The sim's guests keep their host key per
// VM, so they pin the same way.
func (s *Server) vmHostKeyCallback(alloc string, vmKey gossh.PublicKey) gossh.HostKeyCallback {
	path := filepath.Join(s.cfg.StateDir, "terminal", "vm_host_keys", alloc)
	vmFP := gossh.FingerprintSHA256(vmKey)
	return func(_ string, _ net.Addr, key gossh.PublicKey) error {
		s.pinMu.Lock()
		defer s.pinMu.Unlock()
		line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key)))
		var pin vmPin
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &pin); err != nil {
				return fmt.Errorf("pinned host key of %s: %w", alloc, err)
			}
			if pin.VMKey == vmFP {
				if pin.HostKey != line {
					return fmt.Errorf("%w: %s presented %s", ErrHostKeyChanged, alloc, gossh.FingerprintSHA256(key))
				}
				return nil
			}
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("pinned host key of %s: %w", alloc, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		b, err = json.Marshal(vmPin{VMKey: vmFP, HostKey: line})
		if err != nil {
			return err
		}
		s.cfg.Log.Info("pinned VM host key", "allocation", alloc, "host_key", gossh.FingerprintSHA256(key))
		return fsutil.WriteFile(path, b, 0o600, fsutil.Synced)
	}
}

// slotIP reads the VM's address from its cloud-init network-config (the
// first address of its management interface, without the prefix length):
// how a real VM is found, since libvirt does not say.
func slotIP(seedDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(seedDir, "network-config"))
	if err != nil {
		return "", err
	}
	var nc struct {
		Ethernets map[string]struct {
			Addresses []string `yaml:"addresses"`
		} `yaml:"ethernets"`
	}
	if err := yaml.Unmarshal(b, &nc); err != nil {
		return "", fmt.Errorf("%s/network-config: %w", seedDir, err)
	}
	for _, e := range nc.Ethernets {
		for _, a := range e.Addresses {
			if ip, _, err := net.ParseCIDR(a); err == nil {
				return ip.String(), nil
			}
		}
	}
	return "", fmt.Errorf("no address in %s/network-config", seedDir)
}
