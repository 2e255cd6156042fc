package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// tryLogin logs in to the controld stand-in with --password-stdin.
func tryLogin(t *testing.T, ctrl *sshkeystest.Controld, cfg *clientconfig.Config, clock *testutil.Clock) (string, error) {
	t.Helper()
	ios, in, _, errOut := cmdtest.Streams(false)
	in.WriteString("hunter2\n")
	opts := &LoginOptions{IO: ios, Email: sshkeystest.Email, PasswordStdin: true, Now: clock.Now,
		Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
		Client: func() (*api.Client, error) { return ctrl.Client(""), nil },
	}
	err := loginRun(context.Background(), opts)
	return errOut.String(), err
}

// files is every file under dir, by path.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("got %d files; want the %d of before", len(after), len(before))
	}
	for path, b := range before {
		if after[path] != b {
			t.Errorf("%s changed", path)
		}
	}
}

// forgedToken is a session token for the stand-in's user, signed by
// another key than the server's.
func forgedToken(t *testing.T) string {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{Subject: sshkeystest.UserID,
		ID: sshkeystest.SessionID}).SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestLoginRefusesForgedReplies: a login reply answered on the bus by
// another client than controld (its token not signed by the server key)
// is refused — at the first login too, since the signed bundle names the
// key — and so is a login whose ssh.cas answer is not signed by the
// pinned key. Nothing is stored.
func TestLoginRefusesForgedReplies(t *testing.T) {
	clock := testutil.NewClock(now)
	ctrl := sshkeystest.Start(t, clock.Now)
	ios, _, _, _ := cmdtest.Streams(false)
	_, cfg := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Server: ctrl.URL})
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(cfg.Path())

	// The first login, with a reply from a forger who answers auth.login
	// on the bus in controld's place.
	ctrl.Stop(t, api.EndpointAuthLogin)
	// The bus is locked down (controld/busauth): the forger here holds the
	// stand-in controld's own identity, the most a bus compromise gives.
	forger := ctrl.NC
	sub, err := forger.Subscribe(api.Subject(api.EndpointAuthLogin), func(m *nats.Msg) {
		data, _ := json.Marshal(api.LoginResponse{Token: forgedToken(t), SessionID: sshkeystest.SessionID,
			ExpiresAt: now.Add(12 * time.Hour), User: api.User{ID: sshkeystest.UserID, Email: sshkeystest.Email}})
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	stderr, err := tryLogin(t, ctrl, cfg, clock)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "login reply was not signed by the server key") ||
		strings.Contains(stderr, "Logged in") {
		t.Fatalf("forged login reply: got %v, stderr %q; want refused", err, stderr)
	}
	sameFiles(t, before, files(t, filepath.Dir(cfg.Path())))
	if c, _ := cfg.Context("dev"); c.Token != "" || c.Trust != nil {
		t.Fatalf("context after a refused login: %+v; want nothing stored", c)
	}

	// controld answers again: the login goes through and pins the server.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	ctrl.Handle(t, api.EndpointAuthLogin, func(*nats.Msg) (any, error) {
		return api.LoginResponse{Token: sshkeystest.Token, SessionID: sshkeystest.SessionID, ExpiresAt: now.Add(12 * time.Hour),
			User: api.User{ID: sshkeystest.UserID, Email: sshkeystest.Email}}, nil
	})
	if stderr, err := tryLogin(t, ctrl, cfg, clock); err != nil || !strings.Contains(stderr, "pinned the server key") {
		t.Fatalf("genuine login: %v, stderr %q; want in, the server pinned", err, stderr)
	}

	// A later login whose ssh.cas is signed by another key.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	ctrl.Update(func(s *sshkeystest.Settings) { s.SignWith = other })
	before = files(t, dir)
	_, err = tryLogin(t, ctrl, cfg, clock)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "but this context trusts") {
		t.Fatalf("login with a forged bundle: got %v; want refused", err)
	}
	sameFiles(t, before, files(t, dir))
}
