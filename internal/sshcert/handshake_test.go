package sshcert

import (
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// offerOnly offers a key without proving it: the client sends the public
// key (an SSH "query"), the server's callback runs and accepts it, then the
// signature is never produced. Anyone can do this with a certificate they
// copied.
type offerOnly struct{ ssh.Signer }

func (offerOnly) Sign(io.Reader, []byte) (*ssh.Signature, error) {
	return nil, errors.New("offered only: no private key")
}

// steps plays auth methods in order, one per attempt.
func steps(methods ...ssh.AuthMethod) ssh.ClientAuthCallback {
	var mu sync.Mutex
	return func(*ssh.ClientAuthContext) (ssh.AuthMethod, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(methods) == 0 {
			return nil, errors.New("no more steps")
		}
		m := methods[0]
		methods = methods[1:]
		return m, nil
	}
}

// gateway is a test server authenticating user certificates the way sshgate
// must. style "per-attempt" uses GuardServerConfig (x/crypto hands each
// attempt its own Permissions); style "shared" hands every attempt of a
// connection the same Permissions value, as gliderlabs/ssh and wish do, and
// uses Store and ConfirmKey. guest also lets anyone in through
// keyboard-interactive, as a sign-up TUI might.
type gateway struct {
	style   string
	guest   bool
	userCA  []ssh.PublicKey
	hostKey ssh.Signer

	// mu protects accepted.
	mu sync.Mutex
	// accepted lists the fingerprints PublicKeyCallback accepted, in order.
	accepted []string
}

type outcome struct {
	verified Verified
	err      error // from the handshake or from VerifiedFrom
}

func (g *gateway) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{}
	cfg.AddHostKey(g.hostKey)
	verify := func(key ssh.PublicKey) (Identity, error) {
		id, err := VerifyUser(g.userCA, key, "", now)
		if err == nil {
			g.mu.Lock()
			g.accepted = append(g.accepted, ssh.FingerprintSHA256(key))
			g.mu.Unlock()
		}
		return id, err
	}
	guestPerms := func() *ssh.Permissions { return &ssh.Permissions{} }
	switch g.style {
	case "per-attempt":
		GuardServerConfig(cfg, func(_ ssh.ConnMetadata, key ssh.PublicKey) (Verified, error) {
			id, err := verify(key)
			if err != nil {
				return Verified{}, err
			}
			return VerifiedUser(key, id), nil
		})
	case "shared":
		shared := &ssh.Permissions{Extensions: map[string]string{}}
		guestPerms = func() *ssh.Permissions { return shared }
		cfg.PublicKeyCallback = func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			id, err := verify(key)
			if err != nil {
				return shared, err
			}
			VerifiedUser(key, id).Store(shared)
			return shared, nil
		}
		cfg.VerifiedPublicKeyCallback = func(_ ssh.ConnMetadata, key ssh.PublicKey, perms *ssh.Permissions, _ string) (*ssh.Permissions, error) {
			if err := ConfirmKey(perms, key); err != nil {
				return nil, err
			}
			return perms, nil
		}
	default:
		panic("unknown style " + g.style)
	}
	if g.guest {
		cfg.KeyboardInteractiveCallback = func(ssh.ConnMetadata, ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			return guestPerms(), nil
		}
	}
	return cfg
}

// serveOne accepts one connection on loopback and reports whose identity
// the server would act as.
func (g *gateway) serveOne(t *testing.T) (string, <-chan outcome) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan outcome, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			out <- outcome{err: err}
			return
		}
		defer nc.Close()
		sconn, chans, reqs, err := ssh.NewServerConn(nc, g.config())
		if err != nil {
			out <- outcome{err: err}
			return
		}
		defer sconn.Close()
		go ssh.DiscardRequests(reqs)
		go func() {
			for ch := range chans {
				ch.Reject(ssh.Prohibited, "test server")
			}
		}()
		v, err := VerifiedFrom(sconn.Permissions)
		out <- outcome{verified: v, err: err}
	}()
	return ln.Addr().String(), out
}

func wait(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(20 * time.Second):
		t.Fatal("got no outcome from the server; want one")
		return outcome{}
	}
}

// TestKeyConfusion is CVE-2024-45337 on loopback: the client offers Bob's
// certificate (which the server's callback accepts) and authenticates with
// its own, Alice's; the server must act as Alice or refuse, never as Bob.
//
// A helper that recorded identities on callback would fail here (each flow
// checks, as a precondition, which recorder it fools): first-wins serves Bob
// in "offer B, authenticate A", first- or last-wins in "offer B, then
// keyboard-interactive". A VerifiedFrom that trusted the stored identity
// without the confirmation serves Bob in the shared style.
func TestKeyConfusion(t *testing.T) {
	userCA := newAuthority(t, "user", newPrivateKey(t))
	hostCA := newAuthority(t, "host", newPrivateKey(t))
	keyA, keyB := newSigner(t), newSigner(t)
	mint := func(k ssh.Signer, user string) (*ssh.Certificate, ssh.Signer) {
		c, err := userCA.SignUser(k.PublicKey(), UserCert{UserID: user, KeyID: user + "@example.com", MaxTTL: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		return c, certSigner(t, c, k)
	}
	certA, alice := mint(keyA, "alice")
	certB, bob := mint(keyB, "bob")
	hostKey := newSigner(t)
	hostCert, err := hostCA.SignHost(hostKey.PublicKey(), []string{"127.0.0.1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	noAnswers := func(string, string, []string, []bool) ([]string, error) { return nil, nil }
	fpA, fpB := ssh.FingerprintSHA256(certA), ssh.FingerprintSHA256(certB)

	flows := []struct {
		name    string
		guest   bool
		methods func() []ssh.AuthMethod
		// fools says which record-on-callback server this flow fools into
		// serving Bob: "first" (first accepted key wins), "any" (first or
		// last wins) or "". Checked, so the flow stays adversarial.
		fools     string
		wantUser  string // "" means: refused (handshake error or no identity)
		wantProof string // fingerprint the identity must carry
	}{
		{"honest B", false, func() []ssh.AuthMethod { return []ssh.AuthMethod{ssh.PublicKeys(bob)} }, "", "bob", fpB},
		{"offer B, authenticate A", false, func() []ssh.AuthMethod {
			return []ssh.AuthMethod{ssh.PublicKeys(offerOnly{bob}), ssh.PublicKeys(alice)}
		}, "first", "alice", fpA},
		// The advisory's order. x/crypto >= v0.31 re-runs the callback for
		// A before accepting its signature, so last-wins survives it.
		{"offer A, offer B, authenticate A", false, func() []ssh.AuthMethod {
			return []ssh.AuthMethod{ssh.PublicKeys(offerOnly{alice}), ssh.PublicKeys(offerOnly{bob}), ssh.PublicKeys(alice)}
		}, "", "alice", fpA},
		{"offer B, then keyboard-interactive guest", true, func() []ssh.AuthMethod {
			return []ssh.AuthMethod{ssh.PublicKeys(offerOnly{bob}), ssh.KeyboardInteractive(noAnswers)}
		}, "any", "", ""},
		{"offer B only", false, func() []ssh.AuthMethod { return []ssh.AuthMethod{ssh.PublicKeys(offerOnly{bob})} }, "first", "", ""},
	}
	for _, style := range []string{"per-attempt", "shared"} {
		for _, f := range flows {
			t.Run(style+"/"+f.name, func(t *testing.T) {
				g := &gateway{style: style, guest: f.guest, userCA: userCA.Trusted(), hostKey: certSigner(t, hostCert, hostKey)}
				addr, out := g.serveOne(t)
				client, clientErr := ssh.Dial("tcp", addr, &ssh.ClientConfig{
					User:            "alloc-1",
					HostKeyCallback: HostKeyCallback(hostCA.Trusted(), func() time.Time { return now }),
					AuthCallback:    steps(f.methods()...),
					Timeout:         10 * time.Second,
				})
				if clientErr == nil {
					client.Close()
				}
				got := wait(t, out)

				g.mu.Lock()
				accepted := append([]string(nil), g.accepted...)
				g.mu.Unlock()
				if !slices.Contains(accepted, fpB) {
					t.Fatalf("precondition: got callback acceptances %q; want B's certificate %s among them", accepted, fpB)
				}
				if f.fools != "" && accepted[0] != fpB {
					t.Fatalf("precondition: got first acceptance %s; want B's %s (a first-wins recorder serves bob)", accepted[0], fpB)
				}
				if f.fools == "any" && accepted[len(accepted)-1] != fpB {
					t.Fatalf("precondition: got last acceptance %s; want B's %s (a last-wins recorder serves bob)", accepted[len(accepted)-1], fpB)
				}

				if f.wantUser == "" {
					if got.err == nil {
						t.Fatalf("got identity %+v; want the connection refused", got.verified)
					}
					return
				}
				if got.err != nil {
					t.Fatalf("got error %v (client: %v); want user %s", got.err, clientErr, f.wantUser)
				}
				if got.verified.User == nil || got.verified.User.UserID != f.wantUser {
					t.Fatalf("got identity %+v; want user %s", got.verified, f.wantUser)
				}
				if got.verified.Fingerprint != f.wantProof {
					t.Fatalf("got identity bound to %s; want %s", got.verified.Fingerprint, f.wantProof)
				}
			})
		}
	}
}

// TestTicketHandshake is the gateway→hostd hop on loopback: hostd accepts a
// ticket for its node and knows which allocation and POSIX user to serve;
// hostd of another node refuses it.
func TestTicketHandshake(t *testing.T) {
	internalCA := newAuthority(t, "internal", newPrivateKey(t))
	hostCA := newAuthority(t, "host", newPrivateKey(t))
	ephemeral := newSigner(t)
	ticket, err := internalCA.SignTicket(ephemeral.PublicKey(), Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu_a1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	hostKey := newSigner(t)
	hostCert, err := hostCA.SignHost(hostKey.PublicKey(), []string{"127.0.0.1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		node     string
		wantErr  bool
		wantUser string
	}{
		{"own node", "n-1", false, "gpu_a1"},
		{"other node", "n-2", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &ssh.ServerConfig{}
			cfg.AddHostKey(certSigner(t, hostCert, hostKey))
			GuardServerConfig(cfg, func(conn ssh.ConnMetadata, key ssh.PublicKey) (Verified, error) {
				tk, err := VerifyTicket(internalCA.Trusted(), key, tt.node, now)
				if err != nil {
					return Verified{}, err
				}
				if conn.User() != tk.PosixUser {
					return Verified{}, ErrPrincipal
				}
				return VerifiedTicket(key, tk), nil
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			out := make(chan outcome, 1)
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					out <- outcome{err: err}
					return
				}
				defer nc.Close()
				sconn, _, reqs, err := ssh.NewServerConn(nc, cfg)
				if err != nil {
					out <- outcome{err: err}
					return
				}
				defer sconn.Close()
				go ssh.DiscardRequests(reqs)
				v, err := VerifiedFrom(sconn.Permissions)
				out <- outcome{verified: v, err: err}
			}()
			client, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
				User:            "gpu_a1",
				Auth:            []ssh.AuthMethod{ssh.PublicKeys(certSigner(t, ticket, ephemeral))},
				HostKeyCallback: HostKeyCallback(hostCA.Trusted(), func() time.Time { return now }),
				Timeout:         10 * time.Second,
			})
			if err == nil {
				client.Close()
			}
			got := wait(t, out)
			if (got.err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", got.err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if tk := got.verified.Ticket; tk == nil || tk.PosixUser != tt.wantUser || tk.Allocation != "a-1" || tk.Node != "n-1" {
				t.Fatalf("got %+v; want ticket for a-1 on n-1 as %s", got.verified.Ticket, tt.wantUser)
			}
		})
	}
}

// TestHostKeyCallbackRefusesOtherHostCA: a client pinned to the host CA
// refuses a server whose host certificate comes from another CA.
func TestHostKeyCallbackRefusesOtherHostCA(t *testing.T) {
	hostCA := newAuthority(t, "host", newPrivateKey(t))
	rogueCA := newAuthority(t, "host", newPrivateKey(t))
	hostKey := newSigner(t)
	rogueCert, err := rogueCA.SignHost(hostKey.PublicKey(), []string{"127.0.0.1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(certSigner(t, rogueCert, hostKey))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if sconn, _, _, err := ssh.NewServerConn(nc, cfg); err == nil {
			sconn.Close()
		}
	}()
	_, err = ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
		User:            "x",
		HostKeyCallback: HostKeyCallback(hostCA.Trusted(), func() time.Time { return now }),
		Timeout:         10 * time.Second,
	})
	if !errors.Is(err, ErrUntrustedCA) {
		t.Fatalf("got %v; want %v", err, ErrUntrustedCA)
	}
}
