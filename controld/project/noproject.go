package project

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// noProjectYet turns Authorize's "no project given" or "not found" into
// what a person who belongs to no project at all needs to hear (a new
// OIDC user, whose context names a default project that is not theirs):
// that they have no project yet, who can add them and how. For anyone
// else, and for other errors, it returns err as it is. Platform admins
// reach every project, so theirs is never this case.
func noProjectYet(ctx context.Context, q store.Querier, ref, userID, platformRole string, err error) error {
	var e *api.Error
	if !errors.As(err, &e) || (e.Code != api.CodeNotFound && e.Code != api.CodeInvalidArgument) ||
		platformRole == api.RoleAdmin || userID == "" {
		return err
	}
	var email string
	var member bool
	qerr := q.QueryRow(ctx, `SELECT u.email, EXISTS (SELECT 1 FROM project_members m WHERE m.user_id = u.id)
		FROM users u WHERE u.id = $1`, userID).Scan(&email, &member)
	if qerr != nil {
		// The caller's error stands; this was only to say it better.
		return errors.Join(err, fmt.Errorf("look up projects of %s: %w", userID, qerr))
	}
	if member {
		return err
	}
	hint := fmt.Sprintf("a project's owner, or a platform admin, can add you: `gpuaas project add-member PROJECT --email %s`; "+
		"or start a project of your own with `gpuaas project create NAME`", email)
	if ref == "" {
		return api.Errorf(api.CodeInvalidArgument, "no project given, and you (%s) are not a member of any project yet", email).
			WithHint(hint)
	}
	return api.Errorf(api.CodeNotFound, "project %q not found: you (%s) are not a member of any project yet", ref, email).
		WithHint(hint)
}
