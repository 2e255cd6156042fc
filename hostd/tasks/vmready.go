package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
)

// ErrDriverCheck is readiness's answer when the guest's driver check
// failed: the guest wrote guestimage.FailedMarker, whose reason the error
// carries. The slice must not go active (fail closed).
var ErrDriverCheck = errors.New("guest driver check failed")

// markerProbe prints "ready", "failed" or "waiting", then the marker.
var markerProbe = fmt.Sprintf("if [ -f %[1]s ]; then echo ready; cat %[1]s; elif [ -f %[2]s ]; then echo failed; cat %[2]s; else echo waiting; fi",
	guestimage.ReadyMarker, guestimage.FailedMarker)

// guestMarker logs into the guest at addr as user with key and reads its
// readiness marker: "ready" or "failed" with the marker's text, or
// "waiting".
func guestMarker(ctx context.Context, addr, user string, key gossh.Signer) (state, text string, err error) {
	out, err := guestRun(ctx, addr, user, key, markerProbe)
	if err != nil {
		return "", "", fmt.Errorf("read the readiness marker: %w", err)
	}
	state, text, _ = strings.Cut(strings.TrimSpace(out), "\n")
	return state, strings.TrimSpace(text), nil
}

// guestRun logs into the guest at addr as user with key, runs cmd and
// returns its standard output.
func guestRun(ctx context.Context, addr, user string, key gossh.Signer, cmd string) (string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	// The host key is pinned by the environment's first hop
	// (hostd/env); reading the marker trusts nothing it says but the
	// driver check's verdict, which only the guest's root can write.
	cc, chans, reqs, err := gossh.NewClientConn(nc, addr, &gossh.ClientConfig{
		User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), //nolint:gosec // see above
	})
	if err != nil {
		return "", err
	}
	client := gossh.NewClient(cc, chans, reqs)
	defer client.Close()
	s, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	var out bytes.Buffer
	s.Stdout = &out
	if err := s.Run(cmd); err != nil {
		return "", err
	}
	return out.String(), nil
}

// waitMarker polls the guest's marker with hostd's per-VM key until it
// says ready, failing at once when the guest's driver check failed, and
// with ErrNotReady, the last answer and the end of the guest's serial log
// (serialLog; none when empty) at the readiness deadline.
func (c Config) waitMarker(ctx context.Context, addr, user, keyPath, serialLog string) (string, error) {
	key, err := loadVMKey(keyPath)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, c.ReadinessTimeout)
	defer cancel()
	var marker, last string
	err = poll(ctx, c.PollInterval, func() (bool, error) {
		state, text, err := guestMarker(ctx, addr, user, key)
		switch {
		case err != nil:
			last = err.Error() // the guest may not have its users yet
		case state == "ready":
			marker = text
			return true, nil
		case state == "failed":
			return false, fmt.Errorf("%w: %s", ErrDriverCheck, text)
		default:
			last = "no marker yet"
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrDriverCheck) {
		return "", fmt.Errorf("%w: no %s within %s: %s%s", ErrNotReady, guestimage.ReadyMarker, c.ReadinessTimeout, last, serialTail(serialLog))
	}
	return marker, err
}

// serialTailBytes is how much of the serial log a readiness failure
// quotes.
const serialTailBytes = 1500

// serialTail is "; the guest's serial log ends: ..." with the last
// serialTailBytes of the log, or "" without one.
func serialTail(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	if len(b) > serialTailBytes {
		b = b[len(b)-serialTailBytes:]
	}
	return "; the guest's serial log ends:\n" + strings.TrimSpace(strings.ReplaceAll(string(b), "\r", ""))
}
