// Package secrets owns project_secrets: values a project's jobs name in
// their env as secret:NAME (docs/jobs.md "Secrets",
// docs/decisions/0028-project-secrets.md). A value is stored only sealed
// with the operator's secrets key (Key); no function here returns a value
// except Resolve, which controld/jobs calls to seal a starting job's
// environment to its node (internal/nodeseal).
package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

const cols = `project_id, name, size, digest, set_by, set_at`

func scan(r pgx.CollectableRow) (api.Secret, error) {
	var s api.Secret
	err := r.Scan(&s.ProjectID, &s.Name, &s.Size, &s.Digest, &s.SetBy, &s.SetAt)
	s.SetAt = s.SetAt.UTC()
	return s, err
}

func notFound(name, projectName string) error {
	return api.Errorf(api.CodeNotFound, "secret %q does not exist in project %s", name, projectName).
		WithHint("see `gpuaas secret list`; `gpuaas secret set " + name + "` stores one")
}

// noKey is the refusal of a controld started without --secrets-key-file.
func noKey() error {
	return api.Errorf(api.CodeUnavailable, "this platform keeps no secrets: controld has no secrets key").
		WithHint("an operator starts controld with --secrets-key-file (docs/operators.md)")
}

// Set stores a project's secret (the caller checked the name), replacing
// any value of that name. A project at MaxSecretsPerProject takes no new
// name; a value over MaxSecretBytes is refused. Nothing is written then.
func Set(ctx context.Context, q store.Querier, k *Key, p api.Project, name string, value []byte, actorID string, now time.Time) (api.Secret, error) {
	if k == nil {
		return api.Secret{}, noKey()
	}
	if len(value) > api.MaxSecretBytes {
		return api.Secret{}, api.Errorf(api.CodeInvalidArgument, "value: %d bytes; a secret holds at most %d", len(value), api.MaxSecretBytes)
	}
	var n int
	var exists bool
	if err := q.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE name = $2) > 0 FROM project_secrets
		WHERE project_id = $1`, p.ID, name).Scan(&n, &exists); err != nil {
		return api.Secret{}, fmt.Errorf("count secrets: %w", err)
	}
	if !exists && n >= api.MaxSecretsPerProject {
		return api.Secret{}, api.Errorf(api.CodeInvalidArgument, "project %s has %d secrets, the most it may have", p.Name, n).
			WithHint("remove one with `gpuaas secret rm NAME`")
	}
	nonce, ct, err := k.seal(p.ID, name, value)
	if err != nil {
		return api.Secret{}, fmt.Errorf("seal secret: %w", err)
	}
	s := api.Secret{ProjectID: p.ID, Name: name, Size: len(value), Digest: k.digest(p.ID, name, value), SetBy: actorID, SetAt: now.UTC()}
	if _, err := q.Exec(ctx, `INSERT INTO project_secrets (project_id, name, key_id, nonce, ciphertext, size, digest, set_by, set_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (project_id, name) DO UPDATE SET key_id = $3, nonce = $4, ciphertext = $5, size = $6, digest = $7,
			set_by = $8, set_at = $9`, s.ProjectID, s.Name, k.ID(), nonce, ct, s.Size, s.Digest, s.SetBy, s.SetAt); err != nil {
		return api.Secret{}, fmt.Errorf("store secret: %w", err)
	}
	return s, nil
}

// List returns a project's secrets by name: never a value.
func List(ctx context.Context, q store.Querier, projectID string) ([]api.Secret, error) {
	rows, err := q.Query(ctx, `SELECT `+cols+` FROM project_secrets WHERE project_id = $1 ORDER BY name`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// Remove removes a project's secret; not_found when it has none of that
// name.
func Remove(ctx context.Context, q store.Querier, p api.Project, name string, now time.Time) (api.Secret, error) {
	rows, err := q.Query(ctx, `DELETE FROM project_secrets WHERE project_id = $1 AND name = $2 RETURNING `+cols, p.ID, name)
	if err != nil {
		return api.Secret{}, fmt.Errorf("remove secret: %w", err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Secret{}, notFound(name, p.Name)
	}
	if err != nil {
		return api.Secret{}, fmt.Errorf("remove secret: %w", err)
	}
	t := now.UTC()
	s.RemovedAt = &t
	return s, nil
}

// Resolve returns the values of the secrets refs names (env variable →
// secret name) in project p, by env variable. A name the project has no
// secret of is refused naming the variable:
// `env.KEY: secret "x" does not exist in project P`.
func Resolve(ctx context.Context, q store.Querier, k *Key, p api.Project, refs map[string]string) (map[string]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	vars := make([]string, 0, len(refs))
	names := make([]string, 0, len(refs))
	for v, n := range refs {
		vars = append(vars, v)
		names = append(names, n)
	}
	slices.Sort(vars) // the first missing one named is always the same
	type sealed struct {
		keyID     string
		nonce, ct []byte
	}
	rows, err := q.Query(ctx, `SELECT name, key_id, nonce, ciphertext FROM project_secrets
		WHERE project_id = $1 AND name = ANY($2)`, p.ID, names)
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	found := map[string]sealed{}
	for rows.Next() {
		var n string
		var s sealed
		if err := rows.Scan(&n, &s.keyID, &s.nonce, &s.ct); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read secrets: %w", err)
		}
		found[n] = s
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	out := make(map[string]string, len(refs))
	for _, v := range vars {
		n := refs[v]
		s, ok := found[n]
		if !ok {
			return nil, api.Errorf(api.CodeInvalidArgument, "env.%s: secret %q does not exist in project %s", v, n, p.Name).
				WithHint("set it with `gpuaas secret set " + n + "` (see `gpuaas secret list`)")
		}
		if k == nil {
			return nil, noKey()
		}
		if s.keyID != k.ID() {
			return nil, api.Errorf(api.CodeUnavailable, "env.%s: secret %q of project %s was sealed with another secrets key (%s; this controld has %s)",
				v, n, p.Name, s.keyID, k.ID()).WithHint("set it again with `gpuaas secret set " + n + "`, or ask an operator (docs/operators.md, rotating the secrets key)")
		}
		val, err := k.open(p.ID, n, s.nonce, s.ct)
		if err != nil {
			return nil, fmt.Errorf("open secret %q of project %s: %w", n, p.ID, err)
		}
		out[v] = string(val)
	}
	return out, nil
}

// Effect audits a change of a secret (its name, size and digest: never
// the value) and tells the project's members.
func Effect(ctx context.Context, q store.Querier, action string, s api.Secret) (mutate.Effect, error) {
	users, err := project.MemberIDs(ctx, q, s.ProjectID)
	if err != nil {
		return mutate.Effect{}, err
	}
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "secret", TargetID: s.ProjectID + "/" + s.Name, ProjectID: s.ProjectID,
			Detail: map[string]any{"name": s.Name, "size": s.Size, "digest": s.Digest}},
		Events: []outbox.Event{{Kind: api.EventSecret, Subject: s.Name, ProjectID: s.ProjectID, Users: users, Payload: s}},
	}, nil
}
