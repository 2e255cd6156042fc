package libvirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"
)

// DefaultSocket is libvirtd's read-write Unix socket.
const DefaultSocket = "/var/run/libvirt/libvirt-sock"

// DefaultURI is the system QEMU/KVM driver.
const DefaultURI = "qemu:///system"

// Config is what New needs.
type Config struct {
	// URI names the libvirt driver libvirtd opens for us:
	// "qemu:///system" (the default) on a GPU node, "test:///default"
	// (libvirt's simulated hypervisor) in tests. The transport is always
	// Socket or Dial, never taken from the URI.
	URI string
	// Socket is libvirtd's Unix socket; DefaultSocket when empty. Unused
	// when Dial is set.
	Socket string
	// Dial, when set, opens the connection to libvirtd instead of dialing
	// Socket. It is called again to reconnect after libvirtd restarts.
	Dial func(ctx context.Context) (net.Conn, error)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log receives connection events and per-call debug lines; discarded
	// when nil.
	Log *slog.Logger
}

// CheckAndSetDefaults fills defaults and rejects a malformed URI.
func (c *Config) CheckAndSetDefaults() error {
	if c.URI == "" {
		c.URI = DefaultURI
	}
	u, err := url.Parse(c.URI)
	if err != nil {
		return fmt.Errorf("libvirt uri %q: %w", c.URI, err)
	}
	if u.Scheme == "" {
		return fmt.Errorf("libvirt uri %q: no driver scheme", c.URI)
	}
	if u.Host != "" || strings.Contains(u.Scheme, "+") {
		return errors.New("libvirt uri " + c.URI + ": name a local driver; the transport is Socket or Dial")
	}
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.Dial == nil {
		socket := c.Socket
		c.Dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}
