package webhooks

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestCheckURL(t *testing.T) {
	own := func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil }
	prod := Policy{LocalAddrs: own}
	dev := Policy{AllowPrivate: true, AllowHTTPLoopback: true, LocalAddrs: own}
	for _, tt := range []struct {
		url    string
		policy Policy
		ok     bool
	}{
		{"https://hooks.example.com/gpuaas", prod, true},
		{"https://hooks.example.com:8443/x?y=1", prod, true},
		{"https://198.51.100.10/hook", prod, true},
		{"http://hooks.example.com/gpuaas", prod, false},
		{"ftp://hooks.example.com/", prod, false},
		{"hooks.example.com/gpuaas", prod, false},
		{"https:///nohost", prod, false},
		{"https://user:pw@hooks.example.com/", prod, false},
		{"https://hooks.example.com/#frag", prod, false},
		{"https://127.0.0.1/hook", prod, false},
		{"https://[::1]:8443/hook", prod, false},
		{"https://[::ffff:127.0.0.1]/hook", prod, false},
		{"https://localhost/hook", prod, false},
		{"https://localhost./hook", prod, false},
		{"https://api.localhost/hook", prod, false},
		{"https://10.1.2.3/hook", prod, false},
		{"https://192.168.0.1/hook", prod, false},
		{"https://172.16.5.5/hook", prod, false},
		{"https://169.254.169.254/latest/meta-data", prod, false},
		{"https://100.64.0.1/hook", prod, false},
		{"https://0.0.0.0/hook", prod, false},
		{"https://[fd00::1]/hook", prod, false},
		{"https://[fe80::1]/hook", prod, false},
		{"https://224.0.0.1/hook", prod, false},
		{"https://203.0.113.7/hook", prod, false}, // the machine's own
		{"https://127.0.0.1:8443/hook", dev, true},
		{"http://127.0.0.1:8080/hook", dev, true},
		{"http://10.0.0.1:8080/hook", dev, false},          // http only to loopback
		{"http://localhost:8080/hook", dev, false},         // a literal loopback only
		{"https://0.0.0.0/hook", dev, false},               // never unspecified
		{"https://hooks.example.com/\u202ex", prod, false}, // shown to members: no bidi override
		{"https://hooks.example.com/\x1b[2J", prod, false},
	} {
		err := tt.policy.CheckURL(tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("CheckURL(%q, private %v): %v; want ok %v", tt.url, tt.policy.AllowPrivate, err, tt.ok)
		}
		if err != nil && !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("CheckURL(%q): %v; want invalid_argument", tt.url, err)
		}
	}
}

func TestCheckAddrDenyWinsOverAllowPrivate(t *testing.T) {
	p := Policy{AllowPrivate: true, Deny: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}
	if err := p.CheckAddr(netip.MustParseAddr("10.9.1.1")); !errors.Is(err, ErrAddress) {
		t.Errorf("denied network: %v; want ErrAddress", err)
	}
	if err := p.CheckAddr(netip.MustParseAddr("10.8.1.1")); err != nil {
		t.Errorf("private address with AllowPrivate: %v", err)
	}
}

func TestControlChecksTheDialedAddress(t *testing.T) {
	p := Policy{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}
	if err := p.Control("tcp4", "127.0.0.1:443", nil); !errors.Is(err, ErrAddress) {
		t.Errorf("dial loopback: %v; want ErrAddress", err)
	}
	if err := p.Control("tcp4", "198.51.100.10:443", nil); err != nil {
		t.Errorf("dial a public address: %v", err)
	}
}

func TestCheckEvents(t *testing.T) {
	got, err := CheckEvents([]string{api.EventAllocState, " alloc.state", api.EventBillingBudget})
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v, %v; want two kinds, repeats dropped", got, err)
	}
	for _, bad := range [][]string{nil, {}, {"alloc.exploded"}, {api.EventSSHCA}, {api.EventsGap}} {
		if _, err := CheckEvents(bad); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("CheckEvents(%q): %v; want invalid_argument", bad, err)
		}
	}
}
