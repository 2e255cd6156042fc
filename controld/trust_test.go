package controld_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

// TestTrustBundle: ssh.cas carries, for anyone, the host CA keys and the
// gateway address signed by the key that signs session tokens; a host CA
// rotation shows in the next bundle, a retirement names the key retired.
func TestTrustBundle(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, GatewayAddr: "gw.example.test:2222"})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	anon := env.Client("")

	open := func() (trustbundle.Statement, *api.SSHCAsResponse) {
		t.Helper()
		cas, err := anon.SSHCAs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st, err := trustbundle.Open(cas.Bundle)
		if err != nil {
			t.Fatalf("open the bundle: %v", err)
		}
		return st, cas
	}
	st, cas := open()
	if st.Gateway != "gw.example.test:2222" || len(st.HostCAs) != 1 || !strings.Contains(cas.Host[0], st.HostCAs[0]) ||
		len(st.RetiredHostCAs) != 0 {
		t.Fatalf("got statement %+v; want the one host CA key of %q and the gateway", st, cas.Host)
	}
	// The server key is the one session tokens verify with.
	pub, err := trustbundle.ServerPublicKey(st.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jwt.Parse(env.AdminToken, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Fatalf("the admin's session token does not verify with the bundle's server key: %v", err)
	}

	rotated, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAHost, Stage: true})
	if err != nil {
		t.Fatal(err)
	}
	var oldKey, staged api.CAKey
	for _, k := range rotated.Keys {
		if k.Active {
			oldKey = k
		} else if k.RetiredAt == nil {
			staged = k
		}
	}
	next, _ := open()
	if len(next.HostCAs) != 2 || next.HostCAs[0] != oldKey.PublicKey || next.HostCAs[1] != staged.PublicKey || next.ServerKey != st.ServerKey {
		t.Fatalf("after staging got %+v; want the active key %s then the staged %s, same server key", next, oldKey.ID, staged.ID)
	}
	if _, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAHost, KeyID: staged.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CARetire(ctx, api.CARotateRequest{CA: api.CAHost, KeyID: oldKey.ID}); err != nil {
		t.Fatal(err)
	}
	last, _ := open()
	if !slices.Equal(last.HostCAs, []string{staged.PublicKey}) || !slices.Equal(last.RetiredHostCAs, []string{oldKey.ID}) {
		t.Fatalf("after the retirement got %+v; want only %s trusted and %s retired", last, staged.ID, oldKey.ID)
	}
	if !last.IssuedAt.After(st.IssuedAt) && !last.IssuedAt.Equal(st.IssuedAt) {
		t.Errorf("issued at %s, before the first bundle's %s", last.IssuedAt, st.IssuedAt)
	}
}
