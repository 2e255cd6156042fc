package term_test

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

const testNode = "n-1"

// shapes are the two ways an allocation is served.
var shapes = []string{api.ShapeBaremetal, api.ShapeGPUSlice}

// harness is a terminal server on 127.0.0.1 for one allocation, with its
// internal CA: a sim user for bare metal, a running sim VM for a slice.
type harness struct {
	t        testing.TB
	shape    string
	stateDir string
	alloc    string
	user     string
	caKey    ed25519.PrivateKey
	ca       *sshcert.Authority
	gateway  gossh.Signer // a gateway certificate of ca
	srv      *term.Server
	addr     string
	users    *sim.Users
	hv       *sim.Hypervisor
	hostKey  gossh.PublicKey
	log      *sshtest.Buffer
	// link: the harness's clients come over a link (sshlink), as sshgate's
	// do by default, instead of SSH.
	link bool
}

// transports are the two ways sshgate reaches the terminal.
var transports = []string{"ssh", "link"}

// newHarnessOver is newHarness reached over transport.
func newHarnessOver(t testing.TB, shape, transport string) *harness {
	t.Helper()
	h := newHarness(t, shape)
	h.link = transport == "link"
	return h
}

// eachHarness runs test in parallel subtests ("<shape>/<transport>"), one
// per shape and transport, each with a harness of its own.
func eachHarness(t *testing.T, test func(t *testing.T, h *harness)) {
	for _, shape := range shapes {
		for _, transport := range transports {
			t.Run(shape+"/"+transport, func(t *testing.T) {
				t.Parallel()
				test(t, newHarnessOver(t, shape, transport))
			})
		}
	}
}

func newHarness(t testing.TB, shape string) *harness {
	t.Helper()
	return newHarnessFor(t, shape, "a-7f3e", nil)
}

// newHarnessFor serves allocation alloc; with accounts, bare-metal users
// are found there instead of being made as sim users.
func newHarnessFor(t testing.TB, shape, alloc string, accounts term.Accounts) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir(), shape, alloc, accounts)
}

// newHarnessIn is newHarnessFor with hostd's state in stateDir.
func newHarnessIn(t testing.TB, stateDir, shape, alloc string, accounts term.Accounts) *harness {
	t.Helper()
	h := &harness{t: t, shape: shape, stateDir: stateDir, alloc: alloc, user: api.PosixUser(alloc), log: &sshtest.Buffer{}}
	h.caKey = sshtest.NewKey(t)
	h.ca = sshtest.AuthorityOf(t, api.CAInternal, h.caKey)
	h.gateway = h.gatewayFrom(h.ca, time.Now())
	var err error
	if h.users, err = sim.NewUsers(filepath.Join(h.stateDir, "sim", "users")); err != nil {
		t.Fatal(err)
	}
	cfg := term.Config{StateDir: h.stateDir, Accounts: accounts,
		Log: slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	switch {
	case shape == api.ShapeBaremetal && accounts == nil:
		cfg.Accounts = term.SandboxAccounts{Home: h.users.Home}
		if err := h.users.Create(context.Background(), h.user, nil); err != nil {
			t.Fatal(err)
		}
	case shape == api.ShapeGPUSlice:
		cfg.Accounts = term.SandboxAccounts{Home: h.users.Home}
		h.hv = h.startVM()
		cfg.Hypervisor = h.hv
	}
	h.srv, err = term.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.hostKey = h.srv.HostKey()
	h.srv.SetNode(testNode, shape)
	h.srv.SetTrusted(h.ca.Trusted())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = h.srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

// startVM provisions the allocation's VM the way slice.vm_provision leaves
// it for the terminal: the per-VM key at tasks.PathsFor(...).VMKey, a seed
// authorizing it for the POSIX user, and a running sim domain.
func (h *harness) startVM() *sim.Hypervisor {
	t := h.t
	hv, err := sim.NewHypervisor(filepath.Join(h.stateDir, "sim", "hypervisor"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hv.Close() })
	paths := tasks.PathsFor(h.stateDir, h.alloc)
	key := sshtest.NewKey(t)
	mustWrite(t, paths.VMKey, sshtest.PrivateKeyPEM(t, key, "gpuaas-hostd@"+h.alloc), 0o600)
	ud := "#cloud-config\nusers:\n  - name: " + h.user + "\n    ssh_authorized_keys:\n      - " +
		sshtest.AuthorizedKey(sshtest.SignerOf(t, key).PublicKey()) + "\n"
	mustWrite(t, filepath.Join(paths.SeedDir, "user-data"), []byte(ud), 0o600)
	mustWrite(t, paths.SeedISO, []byte("iso"), 0o600)
	ctx := context.Background()
	spec := host.DomainSpec{Name: h.alloc, VCPUs: 1, MemoryMiB: 512, NUMANode: -1, SeedISO: paths.SeedISO}
	if err := hv.Define(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := hv.Start(ctx, h.alloc); err != nil {
		t.Fatal(err)
	}
	return hv
}

// home is where the POSIX user's files land: the sandbox user's home on
// bare metal, the guest's home in the VM.
func (h *harness) home() string {
	if h.shape == api.ShapeGPUSlice {
		return h.hv.GuestHome(h.alloc, h.user)
	}
	return h.users.Home(h.user)
}

// ticket mints a ticket for the harness's allocation, with changes.
func (h *harness) ticket(change func(*sshcert.Ticket)) gossh.Signer {
	h.t.Helper()
	tk := sshcert.Ticket{Node: testNode, Allocation: h.alloc, PosixUser: h.user, KeyID: "test"}
	if change != nil {
		change(&tk)
	}
	return h.ticketFrom(h.ca, tk, time.Now())
}

func (h *harness) ticketFrom(ca *sshcert.Authority, tk sshcert.Ticket, at time.Time) gossh.Signer {
	h.t.Helper()
	key := sshtest.NewSigner(h.t)
	cert, err := ca.SignTicket(key.PublicKey(), tk, at)
	if err != nil {
		h.t.Fatal(err)
	}
	return sshtest.CertSigner(h.t, cert, key)
}

// gatewayFrom mints a gateway certificate of ca for a fresh key.
func (h *harness) gatewayFrom(ca *sshcert.Authority, at time.Time) gossh.Signer {
	h.t.Helper()
	key := sshtest.NewSigner(h.t)
	cert, err := ca.SignGateway(key.PublicKey(), "test-gw", time.Hour, at)
	if err != nil {
		h.t.Fatal(err)
	}
	return sshtest.CertSigner(h.t, cert, key)
}

// connect connects as user with ticket over the harness's transport, as
// sshgate does: the gateway certificate first, then the ticket.
func (h *harness) connect(user string, ticket gossh.Signer) (*gossh.Client, error) {
	if h.link {
		return h.dialLink(user, h.gateway, ticket, gossh.FixedHostKey(h.hostKey))
	}
	return h.dial(user, gossh.PublicKeys(ticket))
}

// dialLink connects as user over a link, proving gateway and ticket, with
// the host key checked by hostKey.
func (h *harness) dialLink(user string, gateway, ticket gossh.Signer, hostKey gossh.HostKeyCallback) (*gossh.Client, error) {
	nc, err := net.DialTimeout("tcp", h.addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	lc, chans, reqs, err := sshlink.Client(nc, h.addr, &sshlink.ClientConfig{User: user, Gateway: gateway, Ticket: ticket,
		HostKeyCallback: hostKey, Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	return gossh.NewClient(lc, chans, reqs), nil
}

// dial connects as user over SSH as sshgate does: the gateway certificate
// first, then the auth methods given (a fresh ticket when none), one per
// step.
func (h *harness) dial(user string, auth ...gossh.AuthMethod) (*gossh.Client, error) {
	if len(auth) == 0 {
		auth = []gossh.AuthMethod{gossh.PublicKeys(h.ticket(nil))}
	}
	return h.dialSteps(user, append([]gossh.AuthMethod{gossh.PublicKeys(h.gateway)}, auth...)...)
}

// dialSteps connects as user trying exactly these auth methods, one per
// attempt, checking the server's host key.
func (h *harness) dialSteps(user string, methods ...gossh.AuthMethod) (*gossh.Client, error) {
	return gossh.Dial("tcp", h.addr, &gossh.ClientConfig{
		User:            user,
		AuthCallback:    sshtest.Steps(methods...),
		HostKeyCallback: gossh.FixedHostKey(h.hostKey),
		Timeout:         10 * time.Second,
	})
}

// client is a connection with a fresh valid ticket, over the harness's
// transport.
func (h *harness) client() *gossh.Client {
	h.t.Helper()
	c, err := h.connect(h.user, h.ticket(nil))
	if err != nil {
		h.t.Fatalf("dial with a valid ticket: %v", err)
	}
	h.t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustWrite(t testing.TB, name string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, perm); err != nil {
		t.Fatal(err)
	}
}
