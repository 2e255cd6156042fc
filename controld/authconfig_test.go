package controld_test

import (
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testidp"
)

func TestAuthConfig(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t, testidp.Options{})
	tests := []struct {
		name string
		oidc identity.OIDCConfig
		want api.AuthConfigResponse
	}{
		{name: "local only", want: api.AuthConfigResponse{Password: true}},
		{name: "oidc with default scopes", oidc: identity.OIDCConfig{Issuer: idp.URL, ClientID: "gpuaas-cli"},
			want: api.AuthConfigResponse{Password: true, OIDC: &api.OIDCProvider{Issuer: idp.URL, ClientID: "gpuaas-cli",
				Scopes: []string{"openid", "email", "profile"}}}},
		{name: "oidc with its own scopes", oidc: identity.OIDCConfig{Issuer: idp.URL, ClientID: "c", Scopes: []string{"openid", "email"}},
			want: api.AuthConfigResponse{Password: true, OIDC: &api.OIDCProvider{Issuer: idp.URL, ClientID: "c",
				Scopes: []string{"openid", "email"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := controldtest.Start(t, controldtest.Options{NoNodes: true, OIDC: tt.oidc})
			// Anonymous, and with a token that is not valid: public either way.
			for _, c := range []*api.Client{env.AnonClient(), env.Client("not-a-token")} {
				got, err := c.AuthConfig(t.Context())
				if err != nil {
					t.Fatalf("auth.config: %v", err)
				}
				if got.Password != tt.want.Password || (got.OIDC == nil) != (tt.want.OIDC == nil) {
					t.Fatalf("got %+v; want %+v", got, tt.want)
				}
				if g, w := got.OIDC, tt.want.OIDC; g != nil && (g.Issuer != w.Issuer || g.ClientID != w.ClientID || !slices.Equal(g.Scopes, w.Scopes)) {
					t.Fatalf("got oidc %+v; want %+v", *g, *w)
				}
			}
		})
	}
}
