package controld_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestNoProjectGivenUsesServerSideDefault is the regression test of
// "`ssh gpuaas@gateway alloc create …` fails with `no project given`"
// (issue [3/7] §1): a request that names no project acts in the caller's
// default project, which controld keeps (project.use), so it is the same
// from any machine and over SSH. A project the request names (body or
// Gpuaas-Project header) still wins; a user's first project is their
// default until they choose another; bad choices change nothing.
func TestNoProjectGivenUsesServerSideDefault(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := context.Background()
	admin := env.Client(env.AdminToken)
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	bob := env.Client(bobToken, api.WithProject("")) // as over SSH: no header
	carol := env.Client(carolToken, api.WithProject(""))

	defaultOf := func(c *api.Client) string {
		t.Helper()
		who, err := c.Whoami(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if who.DefaultProject == nil {
			return ""
		}
		return who.DefaultProject.Name
	}

	// No project at all: the error says what to do (`project use` cannot
	// help someone who belongs to no project: who can add them can).
	_, err := bob.BillingBalance(ctx, api.BillingRequest{})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalidArgument ||
		!strings.Contains(apiErr.Message, "not a member of any project yet") || !strings.Contains(apiErr.Hint, "project create") {
		t.Fatalf("no project, no default: got %v (hint %q); want invalid_argument saying so, with a `project create` hint", err, apiErr.Hint)
	}

	// The first project one creates becomes one's default.
	if _, err := bob.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "ml-team"}); err != nil {
		t.Fatal(err)
	}
	if got := defaultOf(bob); got != "ml-team" {
		t.Fatalf("default after the first project: got %q; want ml-team", got)
	}
	// Being added to a second project does not change it; the first one
	// added to becomes the default of someone who had none.
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: controldtest.ProjectName, Email: "bob@example.test", Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.ProjectAddMember(ctx, api.AddMemberRequest{Project: "ml-team", Email: "carol@example.test", Role: api.ProjectViewer}); err != nil {
		t.Fatal(err)
	}
	if got, gotCarol := defaultOf(bob), defaultOf(carol); got != "ml-team" || gotCarol != "ml-team" {
		t.Fatalf("defaults after joining: bob %q, carol %q; want ml-team, ml-team", got, gotCarol)
	}
	b, err := bob.BillingBalance(ctx, api.BillingRequest{})
	if err != nil || b.Project != "ml-team" {
		t.Fatalf("balance without a project: got %+v, %v; want ml-team's", b, err)
	}

	// project.use moves it; every request without a project follows.
	p, err := bob.ProjectUse(ctx, controldtest.ProjectName)
	if err != nil || p.Name != controldtest.ProjectName || p.Role != api.ProjectMember {
		t.Fatalf("project use: got %+v, %v; want %s as member", p, err, controldtest.ProjectName)
	}
	if got := defaultOf(bob); got != controldtest.ProjectName {
		t.Fatalf("default after project use: got %q; want %s", got, controldtest.ProjectName)
	}
	if b, err := bob.BillingBalance(ctx, api.BillingRequest{}); err != nil || b.Project != controldtest.ProjectName {
		t.Fatalf("balance after project use: got %+v, %v; want %s's", b, err, controldtest.ProjectName)
	}
	if m, err := bob.ProjectMembers(ctx, ""); err != nil || m.Project.Name != controldtest.ProjectName {
		t.Fatalf("members after project use: got %+v, %v; want %s's", m, err, controldtest.ProjectName)
	}
	if q, err := bob.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); err != nil || q.ProjectID != env.Project.ID {
		t.Fatalf("quote after project use: got %+v, %v; want project %s", q, err, env.Project.ID)
	}
	// A named project wins: the header (-p, GPUAAS_PROJECT, a context's
	// project) and the body alike.
	viaHeader := env.Client(bobToken, api.WithProject("ml-team"))
	if b, err := viaHeader.BillingBalance(ctx, api.BillingRequest{}); err != nil || b.Project != "ml-team" {
		t.Fatalf("balance with the header: got %+v, %v; want ml-team's", b, err)
	}
	if b, err := bob.BillingBalance(ctx, api.BillingRequest{Project: "ml-team"}); err != nil || b.Project != "ml-team" {
		t.Fatalf("balance naming the project: got %+v, %v; want ml-team's", b, err)
	}

	// Bad choices: a clear error, and the default stays.
	for _, tt := range []struct {
		name    string
		project string
		want    error
	}{
		{"empty", "  ", api.ErrInvalidArgument},
		{"no such project", "nope", api.ErrNotFound},
		{"someone else's project", "ml-team-2", api.ErrNotFound},
	} {
		if tt.project == "ml-team-2" {
			if _, err := admin.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "ml-team-2"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := bob.ProjectUse(ctx, tt.project); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
		}
		if got := defaultOf(bob); got != controldtest.ProjectName {
			t.Fatalf("%s: default is now %q; want it unchanged (%s)", tt.name, got, controldtest.ProjectName)
		}
	}
	// The admin's first project, seeded, is theirs; a viewer may choose a
	// project too (it is only where requests go).
	if got := defaultOf(admin); got != controldtest.ProjectName {
		t.Errorf("seeded admin's default: got %q; want %s", got, controldtest.ProjectName)
	}
	if _, err := carol.ProjectUse(ctx, "ml-team"); err != nil {
		t.Errorf("viewer project use: %v", err)
	}
}
