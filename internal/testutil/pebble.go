package testutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// PebbleInstall is how a machine gets the Pebble the tests expect
// (scripts/deps test installs it).
const PebbleInstall = "go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3"

// PebbleOptions configure a Pebble.
type PebbleOptions struct {
	// TLSPort is where Pebble's validation dials TLS-ALPN-01 challenges
	// (every name resolves to 127.0.0.1).
	TLSPort int
	// Validity is the life of the certificates it issues (default 1h).
	Validity time.Duration
}

// Pebble is a running Pebble (Let's Encrypt's RFC 8555 test server) with a
// DNS server of the test's that answers 127.0.0.1 for every name.
type Pebble struct {
	// Directory is the ACME directory URL.
	Directory string
	// CAFile is the PEM root that Pebble's own HTTPS endpoint is signed by
	// (for the ACME client).
	CAFile string
	mgmt   string
	client *http.Client
	// mu protects the following.
	mu      sync.Mutex
	out     strings.Builder
	queries []string
}

// StartPebble starts Pebble on free loopback ports for the test, with
// real validation: it resolves names through the test's DNS server and
// dials their challenges on 127.0.0.1:TLSPort. Stopped at cleanup.
func StartPebble(t testing.TB, opts PebbleOptions) *Pebble {
	t.Helper()
	bin, err := GoBinary("pebble")
	if err != nil {
		t.Fatalf("pebble: %v; install it with `%s`", err, PebbleInstall)
	}
	if opts.Validity <= 0 {
		opts.Validity = time.Hour
	}
	p := &Pebble{}
	dnsAddr := p.serveDNS(t)
	files := TLS(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(files.CAPEM)
	p.CAFile = files.CAFile
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(p.client.CloseIdleConnections)
	// Pebble takes its ports in its config: free ones are picked and a
	// start that loses one of them to another test is retried.
	for attempt := 0; ; attempt++ {
		api, mgmt := freePort(t), freePort(t)
		cfg := map[string]any{"pebble": map[string]any{
			"listenAddress": api, "managementListenAddress": mgmt,
			"certificate": files.CertFile, "privateKey": files.KeyFile,
			"httpPort": opts.TLSPort, "tlsPort": opts.TLSPort,
			"externalAccountBindingRequired": false, "keyAlgorithm": "ecdsa",
			"retryAfter": map[string]int{"authz": 1, "order": 1},
			"profiles": map[string]any{"default": map[string]any{"description": "test",
				"validityPeriod": int(opts.Validity / time.Second)}},
		}}
		raw, _ := json.Marshal(cfg)
		cfgFile := filepath.Join(t.TempDir(), "pebble.json")
		if err := os.WriteFile(cfgFile, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		p.Directory, p.mgmt = "https://"+api+"/dir", "https://"+mgmt
		if p.start(t, bin, cfgFile, dnsAddr) {
			return p
		}
		if attempt == 2 {
			t.Fatalf("pebble did not start:\n%s", p.Log())
		}
	}
}

// start runs Pebble and waits until it answers; false when it exited.
func (p *Pebble) start(t testing.TB, bin, cfgFile, dnsAddr string) bool {
	t.Helper()
	cmd := exec.Command(bin, "-config", cfgFile, "-dnsserver", dnsAddr)
	// No random delays or refused nonces: the test checks issuance and
	// renewal, not a client's retries. No authorization reuse: a renewal
	// is validated again.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
	cmd.SysProcAttr = stripeMockProcAttr()
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pebble: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if _, err := p.Root(); err == nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pebble did not answer within a minute:\n%s", p.Log())
	return false
}

// Write keeps what Pebble prints (its log).
func (p *Pebble) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(b)
	return len(b), nil
}

// Log is what Pebble printed so far.
func (p *Pebble) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Root is the PEM root Pebble issues under, from its management
// endpoint (a new one each start).
func (p *Pebble) Root() ([]byte, error) {
	resp, err := p.client.Get(p.mgmt + "/roots/0")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pebble root: %s %v", resp.Status, err)
	}
	return body, nil
}

// Queried are the names Pebble looked up (lower case, no final dot):
// validation resolves each name it validates.
func (p *Pebble) Queried() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.queries...)
}

// serveDNS answers A queries with 127.0.0.1 and every other with no
// record, over TCP (Pebble's resolver uses it) and UDP on one free port;
// it returns the address.
func (p *Pebble) serveDNS(t testing.TB) string {
	t.Helper()
	var (
		tl  net.Listener
		pc  net.PacketConn
		err error
	)
	for range 10 { // the TCP port's UDP twin may be taken: try another
		if tl, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if pc, err = net.ListenPacket("udp", tl.Addr().String()); err == nil {
			break
		}
		tl.Close()
	}
	if err != nil {
		t.Fatalf("dns listeners: %v", err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qq := range q.Question {
			p.mu.Lock()
			p.queries = append(p.queries, strings.TrimSuffix(strings.ToLower(qq.Name), "."))
			p.mu.Unlock()
			if qq.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
					A: net.IPv4(127, 0, 0, 1)})
			}
		}
		_ = w.WriteMsg(m)
	})
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: tl, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.ShutdownContext(context.Background()) })
	}
	return tl.Addr().String()
}

// freePort is a loopback address whose port was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
