package controld_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// apiStats asks the gpuaas micro service for its statistics, as `nats
// micro stats gpuaas` does, and sums them by endpoint name (over its
// lanes). LastError holds the lanes' last errors, one per line.
func apiStats(t *testing.T, env *controldtest.Env) map[string]micro.EndpointStats {
	t.Helper()
	subj, err := micro.ControlSubject(micro.StatsVerb, api.ServiceName, "")
	if err != nil {
		t.Fatal(err)
	}
	// As `nats micro stats` asks: from the system account, through its
	// import of the services' monitoring subjects.
	msg, err := env.Bus.ConnectSystem(t).Request(subj, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subj, err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatalf("stats %q: %v", msg.Data, err)
	}
	out := map[string]micro.EndpointStats{}
	for _, e := range stats.Endpoints {
		sum := out[e.Name]
		sum.Name = e.Name
		sum.NumRequests += e.NumRequests
		sum.NumErrors += e.NumErrors
		if e.LastError != "" {
			sum.LastError += e.LastError + "\n"
		}
		out[e.Name] = sum
	}
	return out
}

// TestMicroStatsCountErrorReplies: `nats micro stats gpuaas` showed 0
// errors after error replies, because controld published its replies
// itself from its own goroutines, behind micro's back. Each error reply is
// counted on its endpoint, with its code and message as the last error;
// successful replies are requests and no errors.
func TestMicroStatsCountErrorReplies(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)

	const okCalls, notFound, anonymous = 3, 2, 1
	for range okCalls {
		if _, err := admin.CatalogList(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range notFound {
		if _, err := admin.AllocGet(ctx, "a-000000000000"); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("alloc get of no allocation: got %v; want not found", err)
		}
	}
	for range anonymous {
		if _, err := env.Client("").AllocGet(ctx, "a-000000000000"); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("alloc get without a token: got %v; want unauthenticated", err)
		}
	}

	// micro counts a request once its handler has returned, which is after
	// the client has its reply: wait until the last one is in.
	var stats map[string]micro.EndpointStats
	testutil.Eventually(t, "alloc.get's requests counted", func() bool {
		stats = apiStats(t, env)
		return stats[strings.ReplaceAll(api.EndpointAllocGet, ".", "-")].NumRequests >= notFound+anonymous &&
			stats[strings.ReplaceAll(api.EndpointCatalogList, ".", "-")].NumRequests >= okCalls
	})
	get := stats[strings.ReplaceAll(api.EndpointAllocGet, ".", "-")]
	if get.NumRequests != notFound+anonymous || get.NumErrors != notFound+anonymous {
		t.Errorf("alloc-get: got %d requests, %d errors; want %d and %d", get.NumRequests, get.NumErrors,
			notFound+anonymous, notFound+anonymous)
	}
	if !strings.Contains(get.LastError, string(api.CodeUnauthenticated)) {
		t.Errorf("alloc-get: got last errors %q; want the unauthenticated reply among them", get.LastError)
	}
	list := stats[strings.ReplaceAll(api.EndpointCatalogList, ".", "-")]
	if list.NumRequests < okCalls || list.NumErrors != 0 {
		t.Errorf("catalog-list: got %d requests, %d errors; want at least %d requests, no errors",
			list.NumRequests, list.NumErrors, okCalls)
	}
}

// TestLongSKUNotEchoedByControld: a 100 KB SKU came back in full in the
// error reply. controld's message quotes its start and says its size.
func TestLongSKUNotEchoedByControld(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	long := strings.Repeat("a", 100<<10)
	_, err := env.Client(env.AdminToken).AllocCreate(t.Context(), api.AllocCreateRequest{SKU: long, GPUs: 1})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeNotFound {
		t.Fatalf("alloc create with a 100 KB SKU: got %v; want not found", err)
	}
	if len(e.Message) > 256 || !strings.Contains(e.Message, "…[102400 bytes]") {
		t.Errorf("got a %d-byte message %.200q; want the SKU cut, with its size", len(e.Message), e.Message)
	}
}
