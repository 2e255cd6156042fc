package images

import (
	"context"
	"errors"
	"strings"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// What the catalogs' endpoints share (images' and controld/apps'): who the
// caller is to Decide, how a request names an entry, where a publish adds
// one, and a change's audit row and event (docs/images.md, docs/apps.md,
// "Publishing apps").

// PlatformRole is the caller's platform role as the catalog honours it: a
// session delegated through the SSH gateway acts as a user, as it is
// refused ops.* and operator endpoints.
func PlatformRole(r *endpoint.Request) string {
	if r.Principal.Delegated {
		return api.RoleUser
	}
	return r.Principal.Role
}

// IsOperator reports whether the caller is an operator or an admin, as
// the catalog honours it (PlatformRole).
func IsOperator(r *endpoint.Request) bool {
	role := PlatformRole(r)
	return role == api.RoleOperator || role == api.RoleAdmin
}

// CatalogActor is the caller as images.Decide and apps.Decide see them
// for an entry of projectID ("" for the platform's).
func CatalogActor(ctx context.Context, q store.Querier, r *endpoint.Request, projectID string) (Actor, error) {
	who := Actor{PlatformRole: PlatformRole(r)}
	if projectID == "" {
		return who, nil
	}
	role, err := project.RoleOf(ctx, q, projectID, r.Principal.UserID)
	if err != nil {
		return who, err
	}
	who.Access = project.AccessFor(role, who.PlatformRole)
	return who, nil
}

// Kind is what finding an entry of a catalog (FindEntry) needs of it: its table
// (Catalog), reading an entry, its scope, and who sees it.
type Kind[T any] struct {
	Catalog Catalog
	ByID    func(context.Context, store.Querier, string, bool) (T, error)
	// Scope is the entry's project's id and name ("" for the platform's).
	Scope   func(T) (id, name string)
	Visible func(T, Actor) bool
	// Runs, when set, is whether a run takes the entry by its name: a
	// run passes over an entry that does not (controld/apps.ForRun takes
	// only promoted apps).
	Runs func(T) bool
}

// ImageKind is the image catalog as FindEntry reads it.
var ImageKind = Kind[api.Image]{Catalog: Images, ByID: ByID, Visible: Visible,
	Scope: func(i api.Image) (string, string) { return i.ProjectID, i.Project }}

// Ref is how a request names an entry: Ref, its id or name; Project, the
// project named (-p/--project); Platform, the platform's (--platform);
// RunOrder, a name seen in both scopes is the project's, as a run
// resolves it (api.AppRef.RunOrder), not refused.
type Ref struct {
	Ref, Project       string
	Platform, RunOrder bool
}

// ProjectID is the project whose own entries a name refers to: the one
// named, else the caller's (the header, their default); "" for none.
func ProjectID(ctx context.Context, q store.Querier, r *endpoint.Request, named string) (string, error) {
	ref, err := project.Ref(ctx, q, r, named)
	if err != nil || ref == "" {
		return "", err
	}
	if named == "" {
		p, err := project.Resolve(ctx, q, ref)
		if err != nil {
			return "", err
		}
		return p.ID, nil
	}
	// A project named with -p is one the caller may read: a non-member
	// learns nothing more than "not found", whether it exists or not.
	p, err := project.Authorize(ctx, q, ref, r.Principal.UserID, PlatformRole(r), project.AccessRead)
	if err != nil {
		return "", err
	}
	return p.ID, nil
}

// FindEntry returns the entry ref names that the caller may see (else
// not_found, as for one that does not exist), and the caller as Decide
// sees them. A name is looked up in the project named, or among the
// platform's with Platform; with neither, in the caller's project (the
// header, their default) and the platform's, and a name the caller sees
// in both is refused naming both: which one a lifecycle verb moves is the
// caller's to say (docs/apps.md, "Publishing apps"). lock takes the rows
// read for the rest of the transaction.
func FindEntry[T any](ctx context.Context, q store.Querier, r *endpoint.Request, k Kind[T], ref Ref, lock bool) (T, Actor, error) {
	var zero T
	name := strings.TrimSpace(ref.Ref)
	if ref.Platform && ref.Project != "" {
		return zero, Actor{}, api.Errorf(api.CodeInvalidArgument, "a %s is the platform's or a project's, not both", k.Catalog.Noun).
			WithHint("drop --platform or -p/--project")
	}
	where := Where{Platform: ref.Project == ""}
	if !ref.Platform {
		pid, err := ProjectID(ctx, q, r, ref.Project)
		if err != nil {
			return zero, Actor{}, err
		}
		where.ProjectID = pid
	}
	found, err := k.Catalog.IDs(ctx, q, name, where)
	if err != nil {
		return zero, Actor{}, err
	}
	var seen []T
	var actors []Actor
	for _, id := range found {
		e, err := k.ByID(ctx, q, id, lock)
		if errors.Is(err, api.ErrNotFound) {
			continue
		}
		if err != nil {
			return zero, Actor{}, err
		}
		pid, _ := k.Scope(e)
		if (ref.Platform && pid != "") || (ref.Project != "" && pid != where.ProjectID) {
			continue // an id of an entry outside the scope asked for
		}
		who, err := CatalogActor(ctx, q, r, pid)
		if err != nil {
			return zero, Actor{}, err
		}
		if k.Visible(e, who) {
			seen, actors = append(seen, e), append(actors, who)
		}
	}
	switch len(seen) {
	case 0:
		return zero, Actor{}, k.Catalog.NotFound(name)
	case 1:
		return seen[0], actors[0], nil
	}
	if ref.RunOrder {
		for i, e := range seen {
			if k.Runs == nil || k.Runs(e) {
				return e, actors[i], nil
			}
		}
		return seen[0], actors[0], nil
	}
	// IDs returns the project's entry first, the platform's second (both
	// nouns, image and app, take "an").
	_, pname := k.Scope(seen[0])
	return zero, Actor{}, api.Errorf(api.CodeInvalidArgument,
		"%s is both a platform %s and an %s of project %s: say --platform or --project", name, k.Catalog.Noun, k.Catalog.Noun, pname).
		WithHint("add --platform for the platform's, or -p " + pname + " for the project's")
}

// PublishScope is the scope a publish adds its entry to: the platform's
// with platform, else the project named (the header, the caller's
// default), which the caller must be able to read; who may publish there
// is Decide's.
func PublishScope(ctx context.Context, q store.Querier, r *endpoint.Request, named string, platform bool) (scope, projectID, projectName string, err error) {
	if platform {
		return api.ImageScopePlatform, "", "", nil
	}
	ref, err := project.Ref(ctx, q, r, named)
	if err != nil {
		return "", "", "", err
	}
	if ref == "" {
		return "", "", "", api.Errorf(api.CodeInvalidArgument, "publish into which project?").
			WithHint("pass -p/--project, or --platform (operators)")
	}
	p, err := project.Authorize(ctx, q, ref, r.Principal.UserID, PlatformRole(r), project.AccessRead)
	if err != nil {
		return "", "", "", err
	}
	return api.ImageScopeProject, p.ID, p.Name, nil
}

// CatalogEffect is a catalog change's audit row and its one event, told
// to the members of the entry's project when it is a project's own.
func CatalogEffect(ctx context.Context, q store.Querier, endpoint, targetType, kind, id, projectID string, payload any,
	detail map[string]any) (mutate.Effect, error) {
	var users []string
	if projectID != "" {
		var err error
		if users, err = project.MemberIDs(ctx, q, projectID); err != nil {
			return mutate.Effect{}, err
		}
	}
	return mutate.Effect{
		Audit:  audit.Entry{Action: endpoint, TargetType: targetType, TargetID: id, ProjectID: projectID, Detail: detail},
		Events: []outbox.Event{{Kind: kind, Subject: id, ProjectID: projectID, Users: users, Payload: payload}},
	}, nil
}

// Effect is an image change's audit row and its one event, told to the
// members of a project-private image's project.
func Effect(ctx context.Context, q store.Querier, endpoint string, img api.Image, detail map[string]any) (mutate.Effect, error) {
	return CatalogEffect(ctx, q, endpoint, "image", api.EventImage, img.ID, img.ProjectID, img, detail)
}
