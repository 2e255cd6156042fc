package sshconfig

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
)

func TestParseGateway(t *testing.T) {
	tests := []struct {
		in      string
		want    Gateway
		wantErr bool
	}{
		{in: "localhost:2222", want: Gateway{"localhost", 2222}},
		{in: "gw.example.com", want: Gateway{"gw.example.com", 22}},
		{in: "[::1]:2222", want: Gateway{"::1", 2222}},
		{in: "10.0.0.1:22", want: Gateway{"10.0.0.1", 22}},
		{in: "host:0", wantErr: true},
		{in: "host:http", wantErr: true},
		{in: "-oProxyCommand=x:22", wantErr: true},
		{in: "a b:22", wantErr: true},
		{in: "*.example.com:22", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseGateway(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("ParseGateway(%q): got %+v, %v; want %+v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	if got := (Gateway{"localhost", 22}).KnownHostsPattern(); got != "localhost" {
		t.Errorf("got %q; want localhost", got)
	}
	if got := (Gateway{"::1", 2222}).KnownHostsPattern(); got != "[::1]:2222" {
		t.Errorf("got %q; want [::1]:2222", got)
	}
}

// block is one Host or Match section of an ssh_config.
type block struct {
	header string
	opts   map[string][]string // lower-cased keyword → values
}

// parseConfig reads ssh_config sections the way ssh does: keyword, then
// the rest of the line (one quoted argument or words).
func parseConfig(t *testing.T, b []byte) []block {
	t.Helper()
	var blocks []block
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		kw, arg, _ := strings.Cut(line, " ")
		kw = strings.ToLower(kw)
		if kw == "host" || kw == "match" {
			blocks = append(blocks, block{header: kw + " " + arg, opts: map[string][]string{}})
			continue
		}
		if len(blocks) == 0 {
			t.Fatalf("option %q before any Host or Match", line)
		}
		blocks[len(blocks)-1].opts[kw] = append(blocks[len(blocks)-1].opts[kw], strings.Trim(arg, `"`))
	}
	return blocks
}

func testParams(dir string) Params {
	return Params{Context: "dev", Server: "nats://127.0.0.1:4222", Gateway: Gateway{"localhost", 2222}, Paths: sshkeys.For(dir, "dev")}
}

func TestRenderConfig(t *testing.T) {
	p := testParams("/home/ada/.config/gpuaas")
	b, err := RenderConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	blocks := parseConfig(t, b)
	wantHeaders := []string{"host gpuaas-dev", "match host localhost user a-*,w-*,vol-*,gpuaas"}
	if len(blocks) != len(wantHeaders) {
		t.Fatalf("got %d blocks; want %d:\n%s", len(blocks), len(wantHeaders), b)
	}
	for i, blk := range blocks {
		if blk.header != wantHeaders[i] {
			t.Errorf("block %d: got %q; want %q", i, blk.header, wantHeaders[i])
		}
		want := map[string]string{
			"port":                  "2222",
			"identityfile":          p.Paths.Key,
			"certificatefile":       p.Paths.Cert,
			"userknownhostsfile":    p.Paths.KnownHosts,
			"identitiesonly":        "yes",
			"stricthostkeychecking": "yes",
		}
		for kw, v := range want {
			if got := blk.opts[kw]; len(got) != 1 || got[0] != v {
				t.Errorf("%s: got %s %q; want %q", blk.header, kw, got, v)
			}
		}
	}
	if got := blocks[0].opts["hostname"]; len(got) != 1 || got[0] != "localhost" {
		t.Errorf("alias: got HostName %q; want localhost", got)
	}
	if got := blocks[0].opts["user"]; len(got) != 1 || got[0] != CommandUser {
		t.Errorf("alias: got User %q; want %s (the gateway's dashboard and commands)", got, CommandUser)
	}
	if !bytes.Contains(b, []byte("#   Include "+p.Paths.Config+"\n")) {
		t.Errorf("the config does not say how to include it:\n%s", b)
	}
}

func TestRenderConfigQuotesPaths(t *testing.T) {
	b, err := RenderConfig(testParams("/home/ada/My Config/100%"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `IdentityFile "/home/ada/My Config/100%%/ssh/dev/id_ed25519"`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("got:\n%s\nwant a line %s", b, want)
	}
	if line, _ := IncludeLine("/home/ada/My Config/100%/ssh/dev/config"); line != `Include "/home/ada/My Config/100%/ssh/dev/config"` {
		t.Errorf("got %s; want the path quoted, %% kept", line)
	}
	if _, err := RenderConfig(testParams(`/home/ada/"x"`)); err == nil {
		t.Error(`got no error for a path with '"'`)
	}
}

func TestRenderKnownHostsDuringRotation(t *testing.T) {
	oldCA, newCA := newTestCA(t, "host"), newTestCA(t, "host")
	lines := append(oldCA.AuthorizedKeysLines(), newCA.AuthorizedKeysLines()...)
	b, err := RenderKnownHosts(Gateway{"localhost", 2222}, lines)
	if err != nil {
		t.Fatal(err)
	}
	rest := b
	for i, ca := range []*sshcert.Authority{oldCA, newCA} {
		marker, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, b)
		}
		if marker != "cert-authority" || len(hosts) != 1 || hosts[0] != "[localhost]:2222" || !bytes.Equal(key.Marshal(), ca.Active().Marshal()) {
			t.Errorf("line %d: got marker %q hosts %q; want cert-authority for [localhost]:2222 and CA %d", i, marker, hosts, i)
		}
		rest = next
	}

	// The file works as known_hosts: host certificates from either CA
	// verify for the gateway, others do not.
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	for _, tt := range []struct {
		name string
		ca   *sshcert.Authority
		host string
		ok   bool
	}{
		{"old CA", oldCA, "localhost:2222", true},
		{"new CA", newCA, "localhost:2222", true},
		{"other CA", newTestCA(t, "host"), "localhost:2222", false},
		{"other port", newCA, "localhost:22", false},
	} {
		if err := check(tt.host, addr, hostCert(t, tt.ca, "localhost")); (err == nil) != tt.ok {
			t.Errorf("%s: got %v; want accepted %v", tt.name, err, tt.ok)
		}
	}

	if _, err := RenderKnownHosts(Gateway{"localhost", 22}, nil); !errors.Is(err, ErrNoHostCA) {
		t.Errorf("got %v without host CA keys; want ErrNoHostCA", err)
	}
}

func newTestCA(t *testing.T, name string) *sshcert.Authority {
	t.Helper()
	key, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := sshcert.New(name, key)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// hostCert returns a host certificate from ca for a fresh key.
func hostCert(t *testing.T, ca *sshcert.Authority, principal string) *ssh.Certificate {
	t.Helper()
	_, signer := hostSigner(t, ca, principal)
	return signer.PublicKey().(*ssh.Certificate)
}

func hostSigner(t *testing.T, ca *sshcert.Authority, principal string) (*ssh.Certificate, ssh.Signer) {
	t.Helper()
	key, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.SignHost(signer.PublicKey(), []string{principal}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(cert, signer)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certSigner
}
