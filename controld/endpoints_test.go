package controld_test

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestEveryEndpointHasAHandler: controld serves exactly the endpoints
// declared in internal/api (api.Endpoints), each once, with its
// declaration's access level and kind, and each answers on the bus: a
// descriptor without a handler, or a handler registered beside the
// declarations, fails here (docs/decisions/0013-endpoint-descriptors.md).
func TestEveryEndpointHasAHandler(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	served := map[string]controld.EndpointInfo{}
	for _, ep := range env.Server.Endpoints() {
		if _, dup := served[ep.Name]; dup {
			t.Errorf("%s is registered twice", ep.Name)
		}
		served[ep.Name] = ep
		if _, ok := api.Lookup(ep.Name); !ok {
			t.Errorf("controld serves %s, which internal/api does not declare", ep.Name)
		}
	}
	declared := api.Endpoints()
	if len(declared) == 0 {
		t.Fatal("api.Endpoints() is empty")
	}
	anon := env.AnonClient()
	for _, spec := range declared {
		ep, ok := served[spec.Name]
		if !ok {
			t.Errorf("%s is declared in internal/api but controld registers no handler for it", spec.Name)
			continue
		}
		if got, want := ep.Access, spec.Access.String(); got != want {
			t.Errorf("%s: served with access %s; want %s", spec.Name, got, want)
		}
		if ep.Mutates != spec.Mutates() || ep.NoReplay == spec.Replayable() {
			t.Errorf("%s: served as mutates=%v noReplay=%v; declared a %s", spec.Name, ep.Mutates, ep.NoReplay, spec.Kind)
		}
		// Any answer will do (a refusal: no token, no key, an empty
		// body): what fails is no one answering the subject at all.
		if err := anon.Call(t.Context(), spec.Name, map[string]any{}, nil); errors.Is(err, api.ErrNoResponders) {
			t.Errorf("%s: no handler answers %s: %v", spec.Name, spec.Subject(), err)
		}
	}
}
