package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// posixEnv is a bare-metal allocation: its POSIX user on the node.
type posixEnv struct {
	f    *Factory
	acct Account
}

// AccountOf is who a posix environment's processes run as (hostd/term
// needs it for the forwarded agent socket's owner); false for any other
// environment.
func AccountOf(e Environment) (Account, bool) {
	p, ok := e.(*posixEnv)
	if !ok {
		return Account{}, false
	}
	return p.acct, true
}

// DialLoopback implements Environment: the node's loopback, which is the
// account's too. hostd (root) is not to be a hop to other hosts.
func (p *posixEnv) DialLoopback(ctx context.Context, hostName string, port int) (net.Conn, error) {
	addrs, err := loopbackAddrs(hostName, port)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		var c net.Conn
		if c, err = p.f.dial(ctx, a); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// Attach implements Environment: a directory of the node appears as a
// symbolic link ~/Name. The account's permissions on the directory
// decide what it may do there (ReadOnly cannot be enforced by a link
// and is refused). Block devices are not supported yet.
func (p *posixEnv) Attach(_ context.Context, m Mount) error {
	link, err := p.mountPath(m.Name)
	if err != nil {
		return fmt.Errorf("attach %q: %w", m.Name, err)
	}
	if !filepath.IsAbs(m.Source) {
		return fmt.Errorf("attach %q: %w: source %q is not an absolute path", m.Name, ErrInvalidSpec, m.Source)
	}
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("attach %q: %w", m.Name, err)
	}
	switch {
	case !fi.IsDir():
		return fmt.Errorf("attach %q: %w: %s is not a directory (devices need a VM)", m.Name, ErrUnsupported, m.Source)
	case m.ReadOnly:
		return fmt.Errorf("attach %q: %w: read-only directories", m.Name, ErrUnsupported)
	}
	// os.Symlink never follows an existing ~/Name: a file the user put
	// there is an error, not overwritten.
	if err := os.Symlink(m.Source, link); err != nil {
		return fmt.Errorf("attach %q: %w", m.Name, err)
	}
	if cred := p.acct.Credential; cred != nil {
		if err := os.Lchown(link, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.Remove(link)
			return fmt.Errorf("attach %q: %w", m.Name, err)
		}
	}
	return nil
}

// Detach implements Environment: removes ~/Name when it is a symbolic
// link (what Attach makes); anything else of the user's is left alone.
func (p *posixEnv) Detach(_ context.Context, name string) error {
	link, err := p.mountPath(name)
	if err != nil {
		return fmt.Errorf("detach %q: %w", name, err)
	}
	fi, err := os.Lstat(link)
	if err != nil {
		return fmt.Errorf("detach %q: %w", name, err)
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("detach %q: %w: ~/%s is not an attachment", name, ErrInvalidSpec, name)
	}
	if err := os.Remove(link); err != nil {
		return fmt.Errorf("detach %q: %w", name, err)
	}
	return nil
}

// mountPath is where mount name appears: a single path element under the
// account's home.
func (p *posixEnv) mountPath(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("%w: mount name %q", ErrInvalidSpec, name)
	}
	return filepath.Join(p.acct.Home, name), nil
}

// Status implements Environment: ready when the account's home is there.
func (p *posixEnv) Status(context.Context) (Status, error) {
	st := Status{Kind: KindPOSIX, Detail: p.acct.Home}
	fi, err := os.Stat(p.acct.Home)
	switch {
	case err == nil:
		st.Ready = fi.IsDir()
	case !errors.Is(err, os.ErrNotExist):
		return st, fmt.Errorf("status of %s: %w", p.acct.Name, err)
	}
	return st, nil
}

// Close implements Environment: nothing is held.
func (p *posixEnv) Close() error { return nil }

// Provision makes the allocation's POSIX user with the renter's keys,
// afresh when one of that name is left from an interrupted attempt for
// the same allocation (the name derives from its id); replaced says so.
// It is hostd/tasks' allocation.provision_user.
func Provision(ctx context.Context, users host.Users, name string, keys []string) (replaced bool, err error) {
	exists, err := users.Exists(ctx, name)
	if err != nil {
		return false, err
	}
	if exists {
		if err := Release(ctx, users, name); err != nil {
			return true, fmt.Errorf("remove leftover user: %w", err)
		}
	}
	return exists, users.Create(ctx, name, keys)
}

// Release ends the user's processes and deletes it; a missing user is
// fine. host.Users.Delete scrubs what else it left on the node.
func Release(ctx context.Context, users host.Users, name string) error {
	kerr := users.KillProcesses(ctx, name)
	_, derr := users.Delete(ctx, name)
	return errors.Join(kerr, derr)
}
