// Package webhooks owns the webhooks and webhook_deliveries tables: a
// project subscribes an https URL to event kinds, every event of those
// kinds in the EVENTS stream becomes a delivery (Ingest), and Sender posts
// each, signed with the webhook's secret, until the receiver answers 2xx
// or its attempts run out (docs/webhooks.md).
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Policy says where deliveries may go. The zero Policy is production's:
// https only, and never to loopback, private, link-local, shared, multicast
// or unspecified addresses, nor to an address of the machine controld runs
// on — a URL a renter names must not reach the platform's inside (SSRF).
type Policy struct {
	// AllowPrivate lets deliveries reach private, loopback and link-local
	// addresses and the machine's own (an operator's receiver inside the
	// network; tests).
	AllowPrivate bool
	// AllowHTTPLoopback also accepts http:// URLs to loopback addresses
	// (`gpuaas dev`).
	AllowHTTPLoopback bool
	// Deny are further networks deliveries never reach, whatever the
	// other fields say (the platform's own addresses).
	Deny []netip.Prefix
	// LocalAddrs lists the machine's own addresses (default: its
	// interfaces' addresses), refused unless AllowPrivate.
	LocalAddrs func() ([]netip.Addr, error)
}

// Errors of a URL or address the policy refuses.
var (
	ErrScheme  = errors.New("only https URLs are allowed")
	ErrAddress = errors.New("address not allowed")
)

// sharedSpace is 100.64.0.0/10 (carrier-grade NAT, RFC 6598), which
// netip does not count as private.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// CheckURL validates a webhook URL at the edge: absolute, https (or http
// to loopback where allowed), a host, no credentials or fragment, and —
// when the host is an address literal — an address the policy allows.
// Names are checked again at every connection (Control), so a name that
// resolves to a refused address later is refused then.
func (p Policy) CheckURL(raw string) error {
	if len(raw) > 2048 {
		return api.Errorf(api.CodeInvalidArgument, "the URL is longer than 2048 characters")
	}
	if err := api.CheckText("the URL", raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return api.Errorf(api.CodeInvalidArgument, "%q is not an absolute URL", raw).
			WithHint("give the receiver's full address, e.g. https://hooks.example.com/gpuaas")
	}
	if u.User != nil || u.Fragment != "" {
		return api.Errorf(api.CodeInvalidArgument, "the URL must not carry credentials or a fragment").
			WithHint("check deliveries with the signature instead (docs/webhooks.md)")
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	addr, literal := hostAddr(host)
	switch u.Scheme {
	case "https":
	case "http":
		if !p.AllowHTTPLoopback || !literal || !addr.IsLoopback() {
			return api.Errorf(api.CodeInvalidArgument, "%s: %v", raw, ErrScheme).
				WithHint("deliveries are signed but not secret: they go over TLS only")
		}
	default:
		return api.Errorf(api.CodeInvalidArgument, "%s: %v", raw, ErrScheme)
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		addr, literal = netip.IPv6Loopback(), true
	}
	if literal {
		if err := p.CheckAddr(addr); err != nil {
			return api.Errorf(api.CodeInvalidArgument, "%s: %v", raw, err).
				WithHint("webhooks reach public addresses only unless the operator allows private ones")
		}
	}
	return nil
}

// hostAddr parses host as an address literal.
func hostAddr(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// CheckAddr says whether a delivery may connect to a.
func (p Policy) CheckAddr(a netip.Addr) error {
	a = a.Unmap()
	for _, d := range p.Deny {
		if d.Contains(a) {
			return fmt.Errorf("%s: %w (denied network %s)", a, ErrAddress, d)
		}
	}
	if a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() || !a.IsValid() {
		return fmt.Errorf("%s: %w (unspecified or multicast)", a, ErrAddress)
	}
	if p.AllowPrivate {
		return nil
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || sharedSpace.Contains(a) ||
		(a.Is4() && a.As4()[0] == 0) {
		return fmt.Errorf("%s: %w (loopback, private or link-local)", a, ErrAddress)
	}
	local := p.LocalAddrs
	if local == nil {
		local = interfaceAddrs
	}
	own, err := local()
	if err != nil {
		return fmt.Errorf("list own addresses: %w", err)
	}
	for _, o := range own {
		if o.Unmap() == a {
			return fmt.Errorf("%s: %w (an address of this machine)", a, ErrAddress)
		}
	}
	return nil
}

// Control is a net.Dialer Control that refuses connections the policy
// does not allow: it sees the address a name resolved to, so DNS cannot
// point a checked name somewhere else later.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook dial %s: %w", address, err)
	}
	return p.CheckAddr(ap.Addr())
}

// interfaceAddrs lists the addresses of this machine's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, pfx.Addr())
		}
	}
	return out, nil
}

// CheckEvents validates the event kinds of a webhook: at least one, each a
// kind webhooks may subscribe to (api.WebhookEvents), no repeats.
func CheckEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "name at least one event kind").
			WithHint("e.g. --events alloc.state; kinds: " + strings.Join(api.WebhookEvents, ", "))
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(events))
	for _, e := range events {
		e = strings.TrimSpace(e)
		if !slices.Contains(api.WebhookEvents, e) {
			return nil, api.Errorf(api.CodeInvalidArgument, "unknown event kind %q", e).
				WithHint("kinds: " + strings.Join(api.WebhookEvents, ", "))
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out, nil
}

// dialContext is the dialer of deliveries: every address it connects to
// passes the policy.
func (p Policy) dialContext() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Control: p.Control}
	return d.DialContext
}
