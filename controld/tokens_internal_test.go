package controld

import (
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestTokenEndpointsAreUsersOwn: every endpoint a token may call is
// declared, and none is beyond a logged-in user's reach (operator,
// admin or gateway endpoints, ops.*, gate.*), nor mints credentials or
// administers a project.
func TestTokenEndpointsAreUsersOwn(t *testing.T) {
	never := map[string]bool{
		api.EndpointTokenCreate: true, api.EndpointTokenRevoke: true, api.EndpointTokenList: true,
		api.EndpointSSHCert: true, api.EndpointAuthLogout: true, api.EndpointProjectCreate: true,
		api.EndpointProjectAddMem: true, api.EndpointProjectUse: true, api.EndpointProjectPolicy: true,
		api.EndpointBillingTopup: true, api.EndpointBillingBudgetSet: true, api.EndpointBillingBudgetClear: true,
	}
	for name := range tokenEndpoints {
		spec, ok := api.Lookup(name)
		if !ok {
			t.Errorf("tokenEndpoints names %s, which is not declared", name)
			continue
		}
		if spec.Access != api.LoggedIn && spec.Access != api.OptionalLogin {
			t.Errorf("tokenEndpoints names %s, whose access is %v", name, spec.Access)
		}
		if delegatedRefused(name, spec.Access) || never[name] {
			t.Errorf("tokenEndpoints names %s, which a token must never call", name)
		}
	}
}
