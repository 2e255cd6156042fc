package libvirt

import (
	"context"
	"fmt"
	"net"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// do runs fn on a connected client and wraps its error for op on name.
// go-libvirt's calls take no context, so fn runs in its own goroutine and
// do returns when ctx ends; the call's effect is then unknown, and the
// call finishes on its own.
func (h *Hypervisor) do(ctx context.Context, op, name string, fn func(*golibvirt.Libvirt) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	lv, err := h.client(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	start := h.cfg.Now()
	done := make(chan error, 1)
	go func() { done <- fn(lv) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	h.cfg.Log.Debug("libvirt call", "op", op, "name", name, "took", h.cfg.Now().Sub(start), "err", err)
	return opError(op, name, err)
}

// client returns the open connection, making a new one when there is none
// or libvirtd dropped the last.
func (h *Hypervisor) client(ctx context.Context) (*golibvirt.Libvirt, error) {
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.sem }()
	if h.closed {
		return nil, host.ErrClosed
	}
	if h.lv != nil {
		if h.lv.IsConnected() {
			return h.lv, nil
		}
		h.cfg.Log.Warn("libvirtd connection lost; reconnecting", "uri", h.cfg.URI)
	}
	lv, err := h.connect(ctx)
	if err != nil {
		return nil, err
	}
	h.lv = lv
	return lv, nil
}

// dialerFunc adapts a function to go-libvirt's socket.Dialer.
type dialerFunc func() (net.Conn, error)

func (f dialerFunc) Dial() (net.Conn, error) { return f() }

// connect dials libvirtd and opens cfg.URI on it.
func (h *Hypervisor) connect(ctx context.Context) (*golibvirt.Libvirt, error) {
	start := h.cfg.Now()
	// stop is set by the dialer, which ConnectToURI calls synchronously.
	var stop func() bool
	lv := golibvirt.NewWithDialer(dialerFunc(func() (net.Conn, error) {
		conn, err := h.cfg.Dial(ctx)
		if err != nil {
			return nil, err
		}
		// The handshake takes no context; closing the connection is what
		// ends it when ctx does.
		stop = context.AfterFunc(ctx, func() { conn.Close() })
		return conn, nil
	}))
	err := lv.ConnectToURI(golibvirt.ConnectURI(h.cfg.URI))
	if stop != nil && !stop() {
		// ctx ended during or just after the handshake and closed the
		// connection.
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("connect to libvirtd for %s: %w", h.cfg.URI, err)
	}
	h.cfg.Log.Info("connected to libvirtd", "uri", h.cfg.URI, "took", h.cfg.Now().Sub(start))
	return lv, nil
}
