package sshconfig

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/cli/ops"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

// snapshot is every file under dir (the config file and the context's SSH
// files), by path.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func wantUnchanged(t *testing.T, before, after map[string]string) {
	t.Helper()
	for path, b := range before {
		if after[path] != b {
			t.Errorf("%s changed:\n%s\nwas:\n%s", path, after[path], b)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("%s appeared", path)
		}
	}
}

func wantRefused(t *testing.T, err error, msg string) {
	t.Helper()
	var apiErr *api.Error
	if !errors.Is(err, api.ErrConflict) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, msg) ||
		!strings.Contains(apiErr.Hint, "gpuaas context trust --reset") {
		t.Fatalf("got %v; want refused with %q and the reset hint", err, msg)
	}
}

func newServerKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPrepareRefusesUntrustedAnswers: once a context has pinned its
// server, an ssh.cas answer that is not signed by the pinned key — forged,
// unsigned, its gateway changed under the signature — or that drops a
// pinned host CA key or is older than the pins, is refused, and the config
// and the SSH files stay byte for byte what they were. A rotation signed
// by the pinned key goes through without a prompt.
func TestPrepareRefusesUntrustedAnswers(t *testing.T) {
	f := newFixture(t, t0)
	ctx := context.Background()
	if _, err := Prepare(ctx, f.env, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.errOut.String(), "pinned the server key "+fingerprintOf(t, sshkeystest.ServerKey)) {
		t.Errorf("stderr %q; want the first pin reported", f.errOut.String())
	}
	saved, err := clientconfig.Load(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := saved.Context("dev"); c.Trust == nil || c.Trust.Gateway != "localhost:2222" || len(c.Trust.HostCAs) != 1 {
		t.Fatalf("saved pins %+v; want the server's, pinned", c.Trust)
	}

	forger := newServerKey(t)
	evilCA := newTestCA(t, "host")
	oldCA := f.ctrl.HostCA.AuthorizedKeysLines()
	tests := []struct {
		name    string
		set     func(*sshkeystest.Settings)
		wantErr string
	}{
		{"forged: another server's key", func(s *sshkeystest.Settings) {
			s.SignWith, s.HostCAs, s.Gateway = forger, evilCA.AuthorizedKeysLines(), "evil.example.com:22"
		}, "but this context trusts " + fingerprintOf(t, sshkeystest.ServerKey)},
		{"unsigned: no bundle", func(s *sshkeystest.Settings) {
			s.NoBundle, s.HostCAs, s.Gateway = true, evilCA.AuthorizedKeysLines(), "evil.example.com:22"
		}, "no signed trust bundle"},
		{"downgrade: a pinned key dropped", func(s *sshkeystest.Settings) {
			s.HostCAs = evilCA.AuthorizedKeysLines() // signed, but the pinned key vanished unretired
		}, "drops the pinned host CA key"},
		{"downgrade: an older change", func(s *sshkeystest.Settings) {
			s.Gateway, s.IssuedAt = "old-gw.example.com:22", t0.Add(-time.Hour)
		}, "older"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot(t, f.dir)
			f.ctrl.Update(tt.set)
			defer f.ctrl.Update(func(s *sshkeystest.Settings) { *s = defaultSettings(f) })
			_, err := Prepare(ctx, f.env, "")
			wantRefused(t, err, tt.wantErr)
			wantUnchanged(t, before, snapshot(t, f.dir))
		})
	}

	t.Run("gateway changed without a valid signature", func(t *testing.T) {
		before := snapshot(t, f.dir)
		f.ctrl.Handle(t, api.EndpointSSHCAs, func(m *nats.Msg) (any, error) {
			v, err := f.ctrl.AnswerSSHCAs(m)
			if err != nil {
				return nil, err
			}
			resp := v.(api.SSHCAsResponse)
			resp.Gateway = "evil.example.com:22"
			resp.Bundle = tamperGateway(t, resp.Bundle, "localhost:2222", "evil.example.com:22")
			return resp, nil
		})
		defer f.ctrl.Handle(t, api.EndpointSSHCAs, f.ctrl.AnswerSSHCAs)
		_, err := Prepare(ctx, f.env, "")
		wantRefused(t, err, "signature does not verify")
		wantUnchanged(t, before, snapshot(t, f.dir))
	})

	t.Run("unsigned fields are not believed", func(t *testing.T) {
		before := snapshot(t, f.dir)
		f.ctrl.Update(func(s *sshkeystest.Settings) { s.Gateway, s.BundleGateway = "evil.example.com:22", "localhost:2222" })
		defer f.ctrl.Update(func(s *sshkeystest.Settings) { *s = defaultSettings(f) })
		s, err := Prepare(ctx, f.env, "")
		if err != nil || s.Gateway != (sshconfig.Gateway{Host: "localhost", Port: 2222}) || s.Written {
			t.Fatalf("got %+v, %v; want the signed gateway and nothing rewritten", s, err)
		}
		wantUnchanged(t, before, snapshot(t, f.dir))
	})

	t.Run("a signed rotation goes through", func(t *testing.T) {
		next := newTestCA(t, "host")
		f.errOut.Reset()
		f.ctrl.Update(func(s *sshkeystest.Settings) { s.HostCAs = append(oldCA, next.AuthorizedKeysLines()...) })
		s, err := Prepare(ctx, f.env, "")
		if err != nil {
			t.Fatal(err)
		}
		kh, _ := os.ReadFile(s.Paths.KnownHosts)
		if strings.Count(string(kh), "@cert-authority ") != 2 || !strings.Contains(f.errOut.String(), "now trusting the new host CA key") {
			t.Fatalf("known_hosts:\n%s\nstderr %q; want both keys and the change reported", kh, f.errOut.String())
		}
		// Then the old key retired.
		f.ctrl.Update(func(s *sshkeystest.Settings) {
			s.HostCAs, s.RetiredHostCAs = next.AuthorizedKeysLines(), []string{ssh.FingerprintSHA256(f.ctrl.HostCA.Active())}
		})
		if s, err = Prepare(ctx, f.env, ""); err != nil {
			t.Fatal(err)
		}
		kh, _ = os.ReadFile(s.Paths.KnownHosts)
		if strings.Count(string(kh), "@cert-authority ") != 1 || !strings.Contains(string(kh), strings.Fields(next.AuthorizedKeysLines()[0])[2]) {
			t.Fatalf("known_hosts after the retirement:\n%s\nwant the new key only", kh)
		}
		// And the retired key cannot come back with a replay of the overlap.
		before := snapshot(t, f.dir)
		f.ctrl.Update(func(s *sshkeystest.Settings) {
			s.HostCAs, s.RetiredHostCAs = append(oldCA, next.AuthorizedKeysLines()...), nil
		})
		_, err = Prepare(ctx, f.env, "")
		wantRefused(t, err, "again")
		wantUnchanged(t, before, snapshot(t, f.dir))
	})
}

func defaultSettings(*fixture) sshkeystest.Settings {
	return sshkeystest.Settings{SessionEnd: t0.Add(12 * time.Hour), TTL: 8 * time.Hour, Gateway: "localhost:2222"}
}

// genuine is what the stand-in's ssh.cas answers with its own settings.
func genuine(t *testing.T, f *fixture) *api.SSHCAsResponse {
	t.Helper()
	b, err := trustbundle.Sign(sshkeystest.ServerKey, trustbundle.Statement{HostCAs: bareLines(f.ctrl.HostCA.AuthorizedKeysLines()),
		Gateway: "localhost:2222", IssuedAt: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return &api.SSHCAsResponse{User: f.ctrl.UserCA.AuthorizedKeysLines(), Host: f.ctrl.HostCA.AuthorizedKeysLines(),
		Gateway: "localhost:2222", Bundle: b}
}

func bareLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		k, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(l))
		out[i] = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
	}
	return out
}

// tamperGateway rewrites the gateway inside a signed statement, keeping
// the signature.
func tamperGateway(t *testing.T, b *api.TrustBundle, from, to string) *api.TrustBundle {
	t.Helper()
	st, err := trustbundle.Open(b)
	if err != nil || st.Gateway != from {
		t.Fatalf("bundle %+v, %v; want gateway %s", st, err, from)
	}
	st.Gateway = to
	body, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return &api.TrustBundle{Statement: base64.StdEncoding.EncodeToString(body), Signature: b.Signature}
}

func fingerprintOf(t *testing.T, k ed25519.PrivateKey) string {
	t.Helper()
	line, err := trustbundle.ServerKeyLine(k.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return trustbundle.Fingerprint(line)
}

// TestForgedResponderOnTheBus: on a NATS server without auth, another
// client answers ssh.cas in controld's place (controld's stand-in stops
// answering it, so the forger's reply is the one the CLI gets) — with
// another host CA and gateway, first unsigned, then signed by its own key,
// then replaying a genuine bundle it sniffed before a rotation. The CLI
// refuses each; nothing on disk changes.
func TestForgedResponderOnTheBus(t *testing.T) {
	f := newFixture(t, t0)
	ctx := context.Background()
	sniffed := genuine(t, f) // what a sniffer saw before the rotation
	next := newTestCA(t, "host")
	f.ctrl.Update(func(s *sshkeystest.Settings) {
		s.HostCAs = next.AuthorizedKeysLines()
		s.RetiredHostCAs = []string{ssh.FingerprintSHA256(f.ctrl.HostCA.Active())}
	})
	f.clock.Advance(time.Minute)
	if _, err := Prepare(ctx, f.env, ""); err != nil {
		t.Fatal(err)
	}
	f.ctrl.Stop(t, api.EndpointSSHCAs)

	// The bus is locked down (controld/busauth): the attacker here holds
	// the stand-in controld's own identity, the most a bus compromise gives.
	attacker := f.ctrl.NC
	evilCA := newTestCA(t, "host")
	forger := newServerKey(t)
	var reply func() (*api.SSHCAsResponse, error)
	sub, err := attacker.Subscribe(api.Subject(api.EndpointSSHCAs), func(m *nats.Msg) {
		resp, err := reply()
		if err != nil {
			t.Error(err)
			return
		}
		data, _ := json.Marshal(resp)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	forged := api.SSHCAsResponse{User: f.ctrl.UserCA.AuthorizedKeysLines(), Host: evilCA.AuthorizedKeysLines(), Gateway: "evil.example.com:22"}

	tests := []struct {
		name    string
		reply   func() (*api.SSHCAsResponse, error)
		wantErr string
	}{
		{"unsigned", func() (*api.SSHCAsResponse, error) { return &forged, nil }, "no signed trust bundle"},
		{"signed by the forger", func() (*api.SSHCAsResponse, error) {
			r := forged
			b, err := trustbundle.Sign(forger, trustbundle.Statement{HostCAs: bareLines(evilCA.AuthorizedKeysLines()),
				Gateway: r.Gateway, IssuedAt: f.clock.Now()})
			r.Bundle = b
			return &r, err
		}, "but this context trusts"},
		{"a sniffed bundle replayed", func() (*api.SSHCAsResponse, error) { return sniffed, nil }, "drops the pinned host CA key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply = tt.reply
			before := snapshot(t, f.dir)
			_, err := Prepare(ctx, f.env, "")
			wantRefused(t, err, tt.wantErr)
			wantUnchanged(t, before, snapshot(t, f.dir))
		})
	}
}

// TestPrepareFollowsCARotation: against a real controld, a host CA
// rotation made with `gpuaas ops ca rotate --stage`, the activation and the
// retirement of the old key are each picked up by `gpuaas ssh-config`
// without a prompt.
func TestPrepareFollowsCARotation(t *testing.T) {
	t.Parallel()
	ctl := controldtest.Start(t, controldtest.Options{NoNodes: true, GatewayAddr: "localhost:2222"})
	ctx := context.Background()
	dir := t.TempDir()
	cfg, err := clientconfig.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", clientconfig.Context{Server: ctl.NATSURL, User: controldtest.AdminEmail, UserID: ctl.Admin.ID,
		Token: ctl.AdminToken, TokenExpiresAt: time.Now().Add(time.Hour)})
	ios, _, _, errOut := cmdutil.Test() // no terminal: a prompt would fail
	env := Env{IO: ios, Now: time.Now,
		Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{}), nil },
		Client: func() (*api.Client, error) { return ctl.Client(ctl.AdminToken), nil },
	}
	knownHosts := func() string {
		t.Helper()
		s, err := Prepare(ctx, env, "")
		if err != nil {
			t.Fatalf("ssh-config: %v", err)
		}
		kh, _ := os.ReadFile(s.Paths.KnownHosts)
		return string(kh)
	}
	opsCmd := func(args ...string) {
		t.Helper()
		ios, _, _, _ := cmdutil.Test()
		f := &cmdutil.Factory{IOStreams: ios, Now: time.Now,
			Config: func() (*clientconfig.Config, error) { return cfg, nil },
			Client: func() (*api.Client, error) { return ctl.Client(ctl.AdminToken), nil }}
		if err := cmdtest.Execute(ops.NewCmdOps(f), args...); err != nil {
			t.Fatalf("gpuaas ops %s: %v", strings.Join(args, " "), err)
		}
	}
	list := func() (active, other api.CAKey) {
		keys, err := ctl.Client(ctl.AdminToken).CAList(ctx, api.CAListRequest{CA: api.CAHost})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys.Keys {
			if k.Active {
				active = k
			} else {
				other = k
			}
		}
		return active, other
	}

	first := knownHosts()
	old, _ := list()
	if strings.Count(first, "@cert-authority") != 1 || !strings.Contains(first, strings.Fields(old.PublicKey)[1]) {
		t.Fatalf("known_hosts:\n%s\nwant the one host CA key %s", first, old.ID)
	}
	opsCmd("ca", "rotate", "--ca", "host", "--stage")
	_, staged := list()
	if kh := knownHosts(); strings.Count(kh, "@cert-authority") != 2 || !strings.Contains(kh, strings.Fields(staged.PublicKey)[1]) {
		t.Fatalf("after staging, known_hosts:\n%s\nwant the staged key %s too", kh, staged.ID)
	}
	opsCmd("ca", "rotate", "--ca", "host", "--key", staged.ID)
	opsCmd("ca", "retire", "--ca", "host", "--key", old.ID)
	if kh := knownHosts(); strings.Count(kh, "@cert-authority") != 1 || !strings.Contains(kh, strings.Fields(staged.PublicKey)[1]) {
		t.Fatalf("after the retirement, known_hosts:\n%s\nwant the new key only", kh)
	}
	if !strings.Contains(errOut.String(), "now trusting the new host CA key "+staged.ID) ||
		!strings.Contains(errOut.String(), "no longer trusting the retired host CA key "+old.ID) {
		t.Errorf("stderr %q; want the rotation reported", errOut.String())
	}
	saved, _ := clientconfig.Load(dir)
	if c, _ := saved.Context("dev"); c.Trust == nil || len(c.Trust.HostCAs) != 1 || len(c.Trust.RetiredHostCAs) != 1 {
		t.Errorf("pins %+v; want the new key and the retired one", c.Trust)
	}
}
