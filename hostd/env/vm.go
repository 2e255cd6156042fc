package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// vmEnv is a slice allocation's VM, reached through SSH hops with the
// per-VM key as the POSIX user.
type vmEnv struct {
	f     *Factory
	alloc string
	user  string

	// mu protects client, the connection Exec and DialLoopback share.
	mu     sync.Mutex
	client *gossh.Client
	closed bool
}

var _ Hopper = (*vmEnv)(nil)

// Addresser is implemented by hypervisors that know where a VM's sshd
// listens (the sim's guests listen on loopback ports); a real VM is
// reached at its slot IP, port 22.
type Addresser interface {
	Address(ctx context.Context, name string) (string, error)
}

// Hop implements Hopper: a new SSH connection into the VM, checking its
// pinned host key. The caller owns it.
func (v *vmEnv) Hop(ctx context.Context) (gossh.Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error) {
	f := v.f
	pemBytes, err := os.ReadFile(VMKeyPath(f.cfg.StateDir, v.alloc))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrNotProvisioned, err)
	}
	key, err := gossh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("VM key of %s: %w", v.alloc, err)
	}
	addr, err := f.vmAddress(ctx, v.alloc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("address of %s's VM: %w", v.alloc, err)
	}
	nc, err := f.dial(ctx, addr)
	if err != nil {
		return nil, nil, nil, err
	}
	// A VM that accepts the connection but stalls the handshake holds
	// the caller no longer than its context allows.
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	cc, chans, reqs, err := gossh.NewClientConn(nc, addr, &gossh.ClientConfig{
		User:            v.user,
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: f.vmHostKeyCallback(v.alloc, key.PublicKey()),
		Timeout:         f.cfg.DialTimeout,
	})
	if err != nil {
		_ = nc.Close()
		return nil, nil, nil, fmt.Errorf("ssh into %s's VM: %w", v.alloc, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return cc, chans, reqs, nil
}

// vmAddress is where the allocation's VM listens for SSH: the hypervisor
// says when it can (the sim), else the slot IP from the VM's seed, port 22.
func (f *Factory) vmAddress(ctx context.Context, alloc string) (string, error) {
	if _, ok := f.cfg.Hypervisor.(Addresser); ok {
		return VMAddress(ctx, f.cfg.Hypervisor, alloc, "")
	}
	ip, err := slotIP(SeedDir(f.cfg.StateDir, alloc))
	if err != nil {
		return "", err
	}
	return VMAddress(ctx, f.cfg.Hypervisor, alloc, ip)
}

// VMAddress is where the sshd of the VM of domain name listens: where the
// hypervisor says when it can (an Addresser), else slotIP (with or
// without a prefix length), port 22.
func VMAddress(ctx context.Context, hv host.Hypervisor, name, slotIP string) (string, error) {
	if a, ok := hv.(Addresser); ok {
		return a.Address(ctx, name)
	}
	ip, _, _ := strings.Cut(slotIP, "/")
	return net.JoinHostPort(ip, "22"), nil
}

// shared is the connection Exec and DialLoopback use, made on first use;
// a broken one is made again.
func (v *vmEnv) shared(ctx context.Context) (*gossh.Client, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, errors.New("environment closed")
	}
	if v.client != nil {
		return v.client, nil
	}
	cc, chans, reqs, err := v.Hop(ctx)
	if err != nil {
		return nil, err
	}
	c := gossh.NewClient(cc, chans, reqs)
	v.client = c
	go func() {
		_ = c.Wait()
		v.mu.Lock()
		if v.client == c {
			v.client = nil
		}
		v.mu.Unlock()
	}()
	return c, nil
}

// DialLoopback implements Environment: a direct-tcpip channel to the VM's
// loopback, made by the VM's sshd.
func (v *vmEnv) DialLoopback(ctx context.Context, hostName string, port int) (net.Conn, error) {
	addrs, err := loopbackAddrs(hostName, port)
	if err != nil {
		return nil, err
	}
	c, err := v.shared(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial loopback of %s's VM: %w", v.alloc, err)
	}
	for _, a := range addrs {
		var conn net.Conn
		if conn, err = c.DialContext(ctx, "tcp", a); err == nil {
			return conn, nil
		}
	}
	return nil, fmt.Errorf("dial loopback of %s's VM: %w", v.alloc, err)
}

// Status implements Environment: the VM's domain state; ready when it
// runs and its key is there.
func (v *vmEnv) Status(ctx context.Context) (Status, error) {
	st := Status{Kind: KindVM}
	if _, err := os.Stat(VMKeyPath(v.f.cfg.StateDir, v.alloc)); err != nil {
		st.Detail = "no VM key"
		return st, nil
	}
	if v.f.cfg.Hypervisor == nil {
		return st, fmt.Errorf("status of %s's VM: %w: no hypervisor", v.alloc, ErrUnsupported)
	}
	ds, err := v.f.cfg.Hypervisor.State(ctx, v.alloc)
	if err != nil {
		return st, fmt.Errorf("status of %s's VM: %w", v.alloc, err)
	}
	st.Ready, st.Detail = ds == host.DomainRunning, string(ds)
	return st, nil
}

// Close implements Environment.
func (v *vmEnv) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed = true
	if v.client != nil {
		err := v.client.Close()
		v.client = nil
		return err
	}
	return nil
}

// loopbackAddrs are the addresses port on hostName's loopback is tried
// at, under sshwire's loopback policy; an empty host is 127.0.0.1.
func loopbackAddrs(hostName string, port int) ([]string, error) {
	if hostName == "" {
		hostName = "127.0.0.1"
	}
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("%w: port %s", ErrInvalidSpec, strconv.Itoa(port))
	}
	return sshwire.LoopbackAddrs(hostName, uint32(port))
}
