package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSecretsByRole: owners and members set and remove a project's
// secrets, viewers list their names only (no value in any reply), and
// someone of another project can neither list them nor use them in a job
// (refused naming the variable, nothing created).
func TestSecretsByRole(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken, api.WithProject(controldtest.ProjectName))
	member := func(email, role string) *api.Client {
		u, tok := env.AddUser(t, email, api.RoleUser)
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: u.Email, Role: role}); err != nil {
			t.Fatal(err)
		}
		return env.Client(tok, api.WithProject(controldtest.ProjectName))
	}
	viewer := member("viewer@example.test", api.ProjectViewer)
	writer := member("writer@example.test", api.ProjectMember)
	const value = "hf_the-value-nobody-reads-back"
	s, err := admin.SecretSet(ctx, api.SecretSetRequest{Name: "hf-token", Value: []byte(value)})
	if err != nil || s.Name != "hf-token" || s.Size != len(value) {
		t.Fatalf("owner's set: %+v, %v", s, err)
	}
	if _, err := writer.SecretSet(ctx, api.SecretSetRequest{Name: "w", Value: []byte("x")}); err != nil {
		t.Fatalf("member's set: %v", err)
	}
	if _, err := writer.SecretRemove(ctx, api.SecretRemoveRequest{Name: "w"}); err != nil {
		t.Fatalf("member's rm: %v", err)
	}
	list, err := viewer.SecretList(ctx, api.SecretListRequest{})
	if err != nil || len(list.Secrets) != 1 || list.Secrets[0].Name != "hf-token" || list.Project != controldtest.ProjectName {
		t.Fatalf("viewer's list: %+v, %v; want hf-token", list, err)
	}
	before := count(t, env, `SELECT count(*) FROM project_secrets`) + count(t, env, `SELECT count(*) FROM audit_logs`)
	if _, err := viewer.SecretSet(ctx, api.SecretSetRequest{Name: "hf-token", Value: []byte("overwritten")}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("viewer's set: err = %v; want forbidden", err)
	}
	if _, err := viewer.SecretRemove(ctx, api.SecretRemoveRequest{Name: "hf-token"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("viewer's rm: err = %v; want forbidden", err)
	}
	if after := count(t, env, `SELECT count(*) FROM project_secrets`) + count(t, env, `SELECT count(*) FROM audit_logs`); after != before {
		t.Errorf("rows after the viewer's refused calls: %d; want %d", after, before)
	}

	// Someone of another project.
	_, outTok := env.AddUser(t, "outsider@example.test", api.RoleUser)
	outsider := env.Client(outTok)
	if _, err := env.Client(outTok, api.WithProject(controldtest.ProjectName)).SecretList(ctx, api.SecretListRequest{}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("outsider's list of the project: err = %v; want not found", err)
	}
	if _, err := outsider.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	outsider = env.Client(outTok, api.WithProject("other"))
	env.Credit(t, "other", 1_000_000)
	a, err := outsider.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	// No hostd here provisions it: active by hand.
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	_, err = outsider.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Run: "true", Secrets: map[string]string{"HF_TOKEN": "hf-token"}})
	if want := `env.HF_TOKEN: secret "hf-token" does not exist in project other`; !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("outsider's job naming the secret: err = %v; want invalid argument %q", err, want)
	}
	if n := count(t, env, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("%d jobs after the refusal; want 0", n)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs a WHERE a::text LIKE '%' || $1 || '%'`, value) +
		count(t, env, `SELECT count(*) FROM outbox_events o WHERE o::text LIKE '%' || $1 || '%'`, value); n != 0 {
		t.Errorf("%d audit or outbox rows hold the value; want 0", n)
	}
}
