package env

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Config configures a Factory.
type Config struct {
	// StateDir is hostd's state directory: the VM keys and seeds live
	// below it (VMKeyPath, SeedDir), and the VMs' pinned host keys in
	// StateDir/terminal/vm_host_keys. Required.
	StateDir string
	// Accounts finds the POSIX users of bare-metal allocations. Required.
	Accounts Accounts
	// Hypervisor locates slice VMs and reports their state; nil on a node
	// that serves no slices.
	Hypervisor host.Hypervisor
	// SFTPServer is the sftp-server binary run as a real account for the
	// sftp subsystem; empty refuses sftp for real accounts. Accounts run
	// as hostd itself (the sim) are served in-process.
	SFTPServer string
	// DialTimeout bounds dialling a VM or a loopback port (default 10s).
	DialTimeout time.Duration
	Log         *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.StateDir == "" || c.Accounts == nil {
		return errors.New("environment: StateDir and Accounts are required")
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Factory opens allocations' environments.
type Factory struct {
	cfg Config
	// pinMu serialises reading and writing the pinned VM host keys.
	pinMu sync.Mutex
}

// NewFactory returns a Factory.
func NewFactory(cfg Config) (*Factory, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Factory{cfg: cfg}, nil
}

// Alloc names an allocation on this node.
type Alloc struct {
	ID        string
	PosixUser string
	// Shape is the node's shape (api.ShapeGPUSlice, api.ShapeBaremetal);
	// empty when not known yet.
	Shape string
}

// Open returns the allocation's environment. This is the one place the
// shape is read: a gpu_slice node's allocations live in VMs, a baremetal
// node's are POSIX users. A node whose shape is not known yet treats an
// allocation with a VM key on it as a slice.
func (f *Factory) Open(ctx context.Context, a Alloc) (Environment, error) {
	vmKey := VMKeyPath(f.cfg.StateDir, a.ID)
	slice := a.Shape == api.ShapeGPUSlice
	if a.Shape == "" {
		_, err := os.Stat(vmKey)
		slice = err == nil
	}
	if slice {
		if _, err := os.Stat(vmKey); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrNotProvisioned, a.ID, err)
		}
		return &vmEnv{f: f, alloc: a.ID, user: a.PosixUser}, nil
	}
	acct, err := f.cfg.Accounts.Lookup(ctx, a.PosixUser)
	if err != nil {
		return nil, err
	}
	return f.POSIX(acct), nil
}

// POSIX is the environment of acct on this node, whatever the shape:
// used by Open for bare metal.
func (f *Factory) POSIX(acct Account) Environment {
	return &posixEnv{f: f, acct: acct}
}

// VM is the environment of allocation alloc's VM, entered as user: the
// way hostd's guest telemetry reaches a VM whose allocation it knows to be
// a slice.
func (f *Factory) VM(alloc, user string) Environment {
	return &vmEnv{f: f, alloc: alloc, user: user}
}

// dial is how environments reach VMs and loopback ports.
func (f *Factory) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: f.cfg.DialTimeout}
	return d.DialContext(ctx, "tcp", addr)
}

// VMKeyPath is the private half of allocation alloc's per-VM key under
// stateDir (OpenSSH PEM, 0600): hostd hops into the VM with it as the
// POSIX user. hostd/tasks makes it (tasks.PathsFor).
func VMKeyPath(stateDir, alloc string) string { return filepath.Join(stateDir, "vmkeys", alloc) }

// SeedDir is allocation alloc's cloud-init seed directory under stateDir;
// its network-config says the VM's address on a real host.
func SeedDir(stateDir, alloc string) string { return filepath.Join(stateDir, "seeds", alloc) }
