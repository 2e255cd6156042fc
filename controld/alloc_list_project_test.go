package controld_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAllocListNamesEachProject is the server half of the regression test
// of "`alloc list` has no PROJECT column across projects": listed across
// the caller's projects, each allocation carries its project's name.
func TestAllocListNamesEachProject(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	ml, err := c.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "ml-team"})
	if err != nil {
		t.Fatal(err)
	}
	env.Credit(t, ml.ID, 100_00)
	want := map[string]string{}
	for _, p := range []string{controldtest.ProjectName, "ml-team"} {
		a, err := c.AllocCreate(ctx, api.AllocCreateRequest{Project: p, SKU: "h200-slice", GPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		want[a.ID] = p
	}
	// No project header: what `gpuaas alloc list` without -p sends.
	all := env.AnonClient().With(api.WithToken(env.AdminToken))
	resp, err := all.AllocList(ctx, api.AllocListRequest{})
	if err != nil || len(resp.Allocations) != 2 {
		t.Fatalf("alloc list: %+v, %v; want both", resp, err)
	}
	for _, a := range resp.Allocations {
		if a.Project != want[a.ID] {
			t.Errorf("%s: project %q; want %q", a.ID, a.Project, want[a.ID])
		}
	}
	one, err := all.AllocList(ctx, api.AllocListRequest{Project: "ml-team"})
	if err != nil || len(one.Allocations) != 1 || one.Allocations[0].Project != "ml-team" {
		t.Fatalf("alloc list -p ml-team: %+v, %v; want its one allocation, named", one, err)
	}
}
