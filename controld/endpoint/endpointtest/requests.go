package endpointtest

import (
	"testing"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
)

// As is a request of userID, of platform role role, acting in project
// (the Gpuaas-Project header; "" sends none).
func As(userID, role, project string) *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: userID, Role: role}, Project: project}
}

// User is a request of userID, a platform user, acting in project (""
// sends no Gpuaas-Project header).
func User(userID, project string) *endpoint.Request {
	return As(userID, api.RoleUser, project)
}

// WantCode fails the test (without stopping it) unless err carries the
// catalog's code (api.CodeOf: an error from outside the catalog is
// internal); code "" wants no error at all.
func WantCode(t testing.TB, what string, err error, code api.Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Errorf("%s: got error %v; want none", what, err)
		}
		return
	}
	if got := api.CodeOf(err); got != code {
		t.Errorf("%s: got error %v (code %q); want code %q", what, err, got, code)
	}
}
