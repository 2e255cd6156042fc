package controld_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

func activeKey(t *testing.T, keys []api.CAKey) api.CAKey {
	t.Helper()
	for _, k := range keys {
		if k.Active {
			return k
		}
	}
	t.Fatalf("no active key in %+v", keys)
	return api.CAKey{}
}

func TestCARotation(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	bobc := env.Client(bobToken)
	issue := func() ssh.PublicKey {
		t.Helper()
		_, line := newSSHKey(t)
		resp, err := bobc.SSHCert(ctx, api.SSHCertRequest{PublicKey: line})
		if err != nil {
			t.Fatal(err)
		}
		return parseCert(t, resp.Certificate)
	}
	userCAs := func() []ssh.PublicKey {
		t.Helper()
		cas, err := env.Client("").SSHCAs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return trusted(t, cas.User)
	}
	before, err := admin.CAList(ctx, api.CAListRequest{CA: api.CAUser})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Keys) != 1 {
		t.Fatalf("got %d user CA keys; want 1", len(before.Keys))
	}
	old := before.Keys[0]
	oldCert := issue()

	rotated, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAUser})
	if err != nil {
		t.Fatal(err)
	}
	fresh := activeKey(t, rotated.Keys)
	if fresh.ID == old.ID || len(rotated.Keys) != 2 {
		t.Fatalf("after rotate got %+v; want a new active key beside %s", rotated.Keys, old.ID)
	}
	newCert := issue()
	trust := userCAs()
	if len(trust) != 2 {
		t.Fatalf("ssh.cas lists %d user CA keys during the overlap; want 2", len(trust))
	}
	for name, cert := range map[string]ssh.PublicKey{"old": oldCert, "new": newCert} {
		id, err := sshcert.VerifyUser(trust, cert, bob.ID, time.Now())
		if err != nil {
			t.Fatalf("%s certificate during the overlap: %v", name, err)
		}
		want := map[string]string{"old": old.ID, "new": fresh.ID}[name]
		if id.CA != want {
			t.Errorf("%s certificate signed by %s; want %s", name, id.CA, want)
		}
	}

	if _, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAUser, KeyID: old.ID}); err != nil {
		t.Fatal(err)
	}
	trust = userCAs()
	if len(trust) != 1 {
		t.Fatalf("ssh.cas lists %d user CA keys after retiring; want 1", len(trust))
	}
	if _, err := sshcert.VerifyUser(trust, oldCert, bob.ID, time.Now()); !errors.Is(err, sshcert.ErrUntrustedCA) {
		t.Errorf("certificate of the retired key got %v; want untrusted", err)
	}
	if _, err := sshcert.VerifyUser(trust, newCert, bob.ID, time.Now()); err != nil {
		t.Errorf("certificate of the new key: %v", err)
	}
	var leftover int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM ssh_ca_keys WHERE id = $1 AND private_key IS NOT NULL`,
		old.ID).Scan(&leftover); err != nil || leftover != 0 {
		t.Errorf("retired key still has its private half (%d, %v)", leftover, err)
	}

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"retire the only key", func() error {
			_, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAUser, KeyID: fresh.ID})
			return err
		}, api.ErrConflict},
		{"retire again", func() error {
			_, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAUser, KeyID: old.ID})
			return err
		}, api.ErrConflict},
		{"retire an unknown key", func() error {
			_, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAUser, KeyID: "SHA256:nope"})
			return err
		}, api.ErrNotFound},
		{"retire another CA's key", func() error {
			_, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAHost, KeyID: fresh.ID})
			return err
		}, api.ErrNotFound},
		{"unknown CA", func() error {
			_, err := admin.CARotate(ctx, api.CARotateRequest{CA: "root"})
			return err
		}, api.ErrInvalidArgument},
		{"rotate as a user", func() error {
			_, err := bobc.CARotate(ctx, api.CARotateRequest{CA: api.CAUser})
			return err
		}, api.ErrForbidden},
		{"list as a user", func() error {
			_, err := bobc.CAList(ctx, api.CAListRequest{})
			return err
		}, api.ErrForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
	var audits int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action IN ('ssh.ca_rotate', 'ssh.ca_retire')`).
		Scan(&audits); err != nil || audits != 2 {
		t.Errorf("got %d CA audit rows (%v); want 2", audits, err)
	}
}

// TestCAStagedRotation rotates the host CA in three steps: stage a key
// (trusted, not signing), activate it, retire the old one; and rolls a
// rotation back by retiring the new active key.
func TestCAStagedRotation(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	gw := gatewayClient(t, env)
	hostCert := func() ssh.PublicKey {
		t.Helper()
		_, line := newSSHKey(t)
		resp, err := gateproto.GateHostCert(ctx, gw, gateproto.GateHostCertRequest{PublicKey: line, Principals: []string{"localhost"}})
		if err != nil {
			t.Fatal(err)
		}
		return parseCert(t, resp.Certificate)
	}
	signer := func(cert ssh.PublicKey) string { return ssh.FingerprintSHA256(cert.(*ssh.Certificate).SignatureKey) }

	list, err := admin.CAList(ctx, api.CAListRequest{CA: api.CAHost})
	if err != nil {
		t.Fatal(err)
	}
	old := activeKey(t, list.Keys)
	staged, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAHost, Stage: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(staged.Keys) != 2 || activeKey(t, staged.Keys).ID != old.ID {
		t.Fatalf("after staging got %+v; want two keys, %s still active", staged.Keys, old.ID)
	}
	var next api.CAKey
	for _, k := range staged.Keys {
		if k.ID != old.ID {
			next = k
		}
	}
	cas, err := env.Client("").SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cas.Host) != 2 {
		t.Fatalf("ssh.cas lists %d host CA keys with one staged; want 2", len(cas.Host))
	}
	if got := signer(hostCert()); got != old.ID {
		t.Errorf("host certificate signed by %s while the new key is staged; want %s", got, old.ID)
	}
	if _, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAHost, KeyID: next.ID[len("SHA256:"):]}); err != nil {
		t.Fatalf("activate (fingerprint without prefix): %v", err)
	}
	if got := signer(hostCert()); got != next.ID {
		t.Errorf("host certificate signed by %s after activation; want %s", got, next.ID)
	}
	// Roll back: retiring the active key hands signing back to the old one.
	if _, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAHost, KeyID: next.ID}); err != nil {
		t.Fatal(err)
	}
	if got := signer(hostCert()); got != old.ID {
		t.Errorf("host certificate signed by %s after the rollback; want %s", got, old.ID)
	}
	if _, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAHost, KeyID: next.ID}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("activating a retired key got %v; want conflict", err)
	}
	all, err := admin.CAList(ctx, api.CAListRequest{Retired: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Keys) != 4 || all.Keys[0].CA != api.CAUser || all.Keys[len(all.Keys)-1].CA != api.CAInternal {
		t.Errorf("list of every key got %+v; want user, host (2) and internal keys in that order", all.Keys)
	}
}
