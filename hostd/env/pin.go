package env

import (
	"encoding/json"
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
func (f *Factory) vmHostKeyCallback(alloc string, vmKey gossh.PublicKey) gossh.HostKeyCallback {
	path := PinPath(f.cfg.StateDir, alloc)
	vmFP := gossh.FingerprintSHA256(vmKey)
	return func(_ string, _ net.Addr, key gossh.PublicKey) error {
		f.pinMu.Lock()
		defer f.pinMu.Unlock()
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
		f.cfg.Log.Info("pinned VM host key", "allocation", alloc, "host_key", gossh.FingerprintSHA256(key))
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

// PinPath is where allocation alloc's VM host key is pinned under
// stateDir.
func PinPath(stateDir, alloc string) string {
	return filepath.Join(stateDir, "terminal", "vm_host_keys", alloc)
}

// ForgetVM removes what the environment kept of allocation alloc's VM
// (its pinned host key) once the VM is released; nothing kept is fine.
// It is part of slice.vm_release.
func ForgetVM(stateDir, alloc string) error {
	if err := os.Remove(PinPath(stateDir, alloc)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("forget %s's VM: %w", alloc, err)
	}
	return nil
}
