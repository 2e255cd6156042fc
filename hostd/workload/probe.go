package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Dialer opens a TCP connection to port on the allocation's loopback:
// its environment's DialLoopback, the path `ssh -L` takes, so a probe
// reaches the app where a renter would (the node's loopback on bare
// metal, the guest's in a slice).
type Dialer func(ctx context.Context, host string, port int) (net.Conn, error)

// probeTimeout bounds one attempt of a probe.
const probeTimeout = 2 * time.Second

// Probe tries p once: a TCP connect to its port, or an HTTP GET of its
// path answering 2xx or 3xx (redirects are not followed). The error says
// what the app answered, or why nothing did.
func Probe(ctx context.Context, dial Dialer, p api.WorkloadProbe) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if p.HTTPPath == "" {
		c, err := dial(ctx, "127.0.0.1", p.Port)
		if err != nil {
			return fmt.Errorf("tcp connect to port %d: %w", p.Port, err)
		}
		return c.Close()
	}
	client := http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dial(ctx, "127.0.0.1", p.Port)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	target := "http://127.0.0.1:" + strconv.Itoa(p.Port) + p.HTTPPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", p.HTTPPath, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s on port %d: %w", p.HTTPPath, p.Port, unwrapURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s on port %d: %s", p.HTTPPath, p.Port, resp.Status)
	}
	return nil
}

// unwrapURL drops net/http's `Get "URL": ` prefix: the probe's error
// names the path and port already.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// AwaitReady probes p every interval until it passes (true), the
// container stops running (running reports false), or ctx ends; it
// returns the probe's last error when it did not pass.
func AwaitReady(ctx context.Context, dial Dialer, p api.WorkloadProbe, interval time.Duration,
	running func(context.Context) (bool, error)) (bool, error) {
	var last error
	for {
		err := Probe(ctx, dial, p)
		switch {
		case err == nil:
			return true, nil
		case ctx.Err() != nil && last != nil:
			return false, last // the wait ended this attempt: the one before says why
		}
		last = err
		if ok, err := running(ctx); err != nil || !ok {
			return false, last
		}
		select {
		case <-ctx.Done():
			return false, last
		case <-time.After(interval):
		}
	}
}
