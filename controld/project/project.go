// Package project owns projects and project_members, and answers the
// question every other domain asks: what is this user's role here?
package project

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,38}[a-z0-9]$`)

// ValidateName checks a project name: 3–40 characters, lower-case letters,
// digits and dashes, starting with a letter.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return api.Errorf(api.CodeInvalidArgument, "%q is not a valid project name", name).
			WithHint("use 3–40 lower-case letters, digits and dashes, starting with a letter")
	}
	return nil
}

// Create inserts a project with owner as its owner; it becomes the
// owner's default project when they have none.
func Create(ctx context.Context, q store.Querier, name, owner string, now time.Time) (api.Project, error) {
	if err := ValidateName(name); err != nil {
		return api.Project{}, err
	}
	p := api.Project{ID: ids.New(ids.Project), Name: name, Role: api.ProjectOwner, CreatedAt: now.UTC()}
	_, err := q.Exec(ctx, `INSERT INTO projects (id, name, created_by, created_at) VALUES ($1,$2,$3,$4)`,
		p.ID, p.Name, owner, p.CreatedAt)
	if store.IsUniqueViolation(err, "projects_name_key") {
		return api.Project{}, api.Errorf(api.CodeConflict, "project %q already exists", name)
	}
	if err != nil {
		return api.Project{}, fmt.Errorf("create project: %w", err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO project_members (project_id, user_id, role, added_at) VALUES ($1,$2,'owner',$3)`,
		p.ID, owner, p.CreatedAt); err != nil {
		return api.Project{}, fmt.Errorf("add owner: %w", err)
	}
	// The owner's first project becomes their default.
	if err := setDefaultIfNone(ctx, q, owner, p.ID, now); err != nil {
		return api.Project{}, err
	}
	return p, nil
}

// Resolve finds a project by id or name. An empty ref is an invalid
// argument with a hint, so "no project chosen" reads differently from
// "no such project".
func Resolve(ctx context.Context, q store.Querier, ref string) (api.Project, error) {
	if ref == "" {
		return api.Project{}, api.Errorf(api.CodeInvalidArgument, "no project given, and you have no default project").
			WithHint("pass -p/--project NAME, or set your default with `gpuaas project use NAME` (see `gpuaas project list`)")
	}
	var p api.Project
	err := q.QueryRow(ctx, resolveSQL, ref).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, api.Errorf(api.CodeNotFound, "project %q not found", ref).WithHint("see `gpuaas project list`")
	}
	if err != nil {
		return p, fmt.Errorf("resolve project: %w", err)
	}
	return p, nil
}

// RoleOf returns userID's role in projectID, or "" when not a member.
func RoleOf(ctx context.Context, q store.Querier, projectID, userID string) (string, error) {
	var role string
	err := q.QueryRow(ctx, `SELECT role FROM project_members WHERE project_id=$1 AND user_id=$2`, projectID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("project role: %w", err)
	}
	return role, nil
}

// Access is what a caller may do in a project.
type Access int

// Access levels, each including the ones before it.
const (
	AccessRead  Access = iota + 1 // viewer
	AccessWrite                   // member: create and release allocations
	AccessAdmin                   // owner: manage members
)

// AuthorizeResource is Authorize for something of project projectID
// (a job, a workload): a caller who may not see the project may not learn
// the thing exists either, so that refusal is notFound (the thing's own
// "not found" error); any other refusal is Authorize's.
func AuthorizeResource(ctx context.Context, q store.Querier, projectID, userID, platformRole string, want Access, notFound error) error {
	_, err := Authorize(ctx, q, projectID, userID, platformRole, want)
	if api.CodeOf(err) == api.CodeNotFound {
		return notFound
	}
	return err
}

// Authorize resolves ref and checks that the caller has at least want.
// Platform operators and admins may read every project; admins may do
// everything. Non-members learn nothing more than "not found".
func Authorize(ctx context.Context, q store.Querier, ref, userID, platformRole string, want Access) (api.Project, error) {
	p, err := Resolve(ctx, q, ref)
	if err != nil {
		return p, noProjectYet(ctx, q, ref, userID, platformRole, err)
	}
	role, err := RoleOf(ctx, q, p.ID, userID)
	if err != nil {
		return p, err
	}
	return decide(ctx, q, p, role, ref, userID, platformRole, want)
}

// resolveSQL reads the project a reference names, by id or by name
// (Resolve, and QueueAuthorize in a caller's batch).
const resolveSQL = `SELECT id, name, created_at FROM projects WHERE id=$1 OR name=$1`

// Authorization is Authorize's two reads queued in a caller's batch
// (QueueAuthorize), so they share its round trip; Check then decides
// exactly as Authorize does, errors and their order included.
type Authorization struct {
	ref, userID string
	p           api.Project
	found       bool
	roles       map[string]string // project id → userID's role, for the projects ref names
}

// QueueAuthorize queues the reads of Authorize(ref, userID) in b: the
// project ref names and userID's role in it. The role is read for every
// project matching ref (by id or by name), and Check keeps the one of
// the project Resolve's read returned, so the answer is Authorize's.
func QueueAuthorize(b *pgx.Batch, dst *Authorization, ref, userID string) {
	dst.ref, dst.userID = ref, userID
	if ref == "" {
		return // Resolve's invalid argument, without a read
	}
	b.Queue(resolveSQL, ref).Fn = func(br pgx.BatchResults) error {
		err := br.QueryRow().Scan(&dst.p.ID, &dst.p.Name, &dst.p.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("resolve project: %w", err)
		}
		dst.found = true
		return nil
	}
	b.Queue(`SELECT m.project_id, m.role FROM project_members m JOIN projects p ON p.id = m.project_id
		WHERE (p.id=$1 OR p.name=$1) AND m.user_id=$2`, ref, userID).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("project role: %w", err)
		}
		dst.roles = map[string]string{}
		var id, role string
		_, err = pgx.ForEachRow(rows, []any{&id, &role}, func() error {
			dst.roles[id] = role
			return nil
		})
		if err != nil {
			return fmt.Errorf("project role: %w", err)
		}
		return nil
	}
}

// Check is Authorize on the reads QueueAuthorize queued (once the batch
// was sent); q serves only the reads of its error paths.
func (a *Authorization) Check(ctx context.Context, q store.Querier, platformRole string, want Access) (api.Project, error) {
	if a.ref == "" || !a.found {
		_, err := Resolve(ctx, q, a.ref) // its error, as Authorize gives it
		if err == nil {
			// Found now, not in the batch's snapshot: decide as Authorize.
			return Authorize(ctx, q, a.ref, a.userID, platformRole, want)
		}
		return api.Project{}, noProjectYet(ctx, q, a.ref, a.userID, platformRole, err)
	}
	return decide(ctx, q, a.p, a.roles[a.p.ID], a.ref, a.userID, platformRole, want)
}

func decide(ctx context.Context, q store.Querier, p api.Project, role, ref, userID, platformRole string, want Access) (api.Project, error) {
	p.Role = role
	have := AccessFor(role, platformRole)
	switch {
	case have == 0:
		return p, noProjectYet(ctx, q, ref, userID, platformRole,
			api.Errorf(api.CodeNotFound, "project %q not found", ref).WithHint("see `gpuaas project list`"))
	case have < want:
		return p, api.Errorf(api.CodeForbidden, "your role in project %s (%s) does not allow this", p.Name, role)
	}
	return p, nil
}

// AccessFor is what a caller with platformRole and memberRole in a
// project ("" when not a member) may do there; 0 is nothing at all (the
// project is not theirs to see).
func AccessFor(memberRole, platformRole string) Access {
	have := accessOf(memberRole)
	if platformRole == api.RoleAdmin {
		have = AccessAdmin
	} else if platformRole == api.RoleOperator && have < AccessRead {
		have = AccessRead
	}
	return have
}

func accessOf(role string) Access {
	switch role {
	case api.ProjectOwner:
		return AccessAdmin
	case api.ProjectMember:
		return AccessWrite
	case api.ProjectViewer:
		return AccessRead
	}
	return 0
}

// ListForUser lists the projects userID belongs to, with their role.
func ListForUser(ctx context.Context, q store.Querier, userID string) ([]api.Project, error) {
	rows, err := q.Query(ctx, `SELECT p.id, p.name, m.role, p.created_at FROM projects p
		JOIN project_members m ON m.project_id = p.id WHERE m.user_id = $1 ORDER BY p.name`, userID)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Project, error) {
		var p api.Project
		return p, r.Scan(&p.ID, &p.Name, &p.Role, &p.CreatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// Members lists a project's members, machine tokens' principals
// included (Kind MemberToken), whether or not they can still act.
func Members(ctx context.Context, q store.Querier, projectID string) ([]api.Member, error) {
	rows, err := q.Query(ctx, `SELECT m.user_id, u.email, m.role, m.added_at,
		CASE WHEN u.provider = 'token' THEN '`+api.MemberToken+`' ELSE '`+api.MemberUser+`' END
		FROM project_members m
		JOIN users u ON u.id = m.user_id WHERE m.project_id = $1 ORDER BY m.added_at, u.email`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Member, error) {
		var m api.Member
		return m, r.Scan(&m.UserID, &m.Email, &m.Role, &m.AddedAt, &m.Kind)
	})
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return out, nil
}

// IDsOf lists the ids of the projects userID belongs to.
func IDsOf(ctx context.Context, q store.Querier, userID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT project_id FROM project_members WHERE user_id = $1`, userID)
	if err != nil {
		return nil, fmt.Errorf("projects of %s: %w", userID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("projects of %s: %w", userID, err)
	}
	return out, nil
}

// Name returns the name of the project with id.
func Name(ctx context.Context, q store.Querier, id string) (string, error) {
	var name string
	err := q.QueryRow(ctx, `SELECT name FROM projects WHERE id = $1`, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", api.Errorf(api.CodeNotFound, "project %q not found", id)
	}
	if err != nil {
		return "", fmt.Errorf("name of project %s: %w", id, err)
	}
	return name, nil
}

// MemberIDs lists the user ids of a project's members (for event fan-out).
func MemberIDs(ctx context.Context, q store.Querier, projectID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT user_id FROM project_members WHERE project_id=$1 ORDER BY user_id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("member ids: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("member ids: %w", err)
	}
	return out, nil
}

// SetMember adds userID to a project with role, or changes their role.
// The project becomes the user's default project when they have none.
func SetMember(ctx context.Context, q store.Querier, projectID, userID, role string, now time.Time) error {
	if accessOf(role) == 0 {
		return api.Errorf(api.CodeInvalidArgument, "%q is not a project role", role).WithHint("use owner, member or viewer")
	}
	if role != api.ProjectOwner {
		// Lock the owners so two concurrent demotions cannot both pass.
		rows, err := q.Query(ctx, `SELECT user_id FROM project_members WHERE project_id=$1 AND role='owner' FOR UPDATE`, projectID)
		if err != nil {
			return fmt.Errorf("set member: %w", err)
		}
		owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("set member: %w", err)
		}
		if len(owners) == 1 && owners[0] == userID {
			return api.Errorf(api.CodeConflict, "that would leave the project without an owner").
				WithHint("make someone else an owner first")
		}
	}
	_, err := q.Exec(ctx, `INSERT INTO project_members (project_id, user_id, role, added_at) VALUES ($1,$2,$3,$4)
		ON CONFLICT (project_id, user_id) DO UPDATE SET role = EXCLUDED.role`, projectID, userID, role, now)
	if err != nil {
		return fmt.Errorf("set member: %w", err)
	}
	// A member's first project becomes their default.
	return setDefaultIfNone(ctx, q, userID, projectID, now)
}
