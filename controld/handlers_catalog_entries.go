package controld

import (
	"context"
	"errors"
	"strings"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// catalogActor is the caller as images.Decide and apps.Decide see them
// for an entry of projectID ("" for the platform's).
func catalogActor(ctx context.Context, q store.Querier, c *call, projectID string) (images.Actor, error) {
	who := images.Actor{PlatformRole: platformRole(c)}
	if projectID == "" {
		return who, nil
	}
	role, err := project.RoleOf(ctx, q, projectID, c.principal.UserID)
	if err != nil {
		return who, err
	}
	who.Access = project.AccessFor(role, who.PlatformRole)
	return who, nil
}

// catalogKind is what finding an entry of a catalog needs of it: its
// table (images.Catalog), reading an entry, its scope, and who sees it.
type catalogKind[T any] struct {
	catalog images.Catalog
	byID    func(context.Context, store.Querier, string, bool) (T, error)
	// scope is the entry's project's id and name ("" for the platform's).
	scope   func(T) (id, name string)
	visible func(T, images.Actor) bool
	// runs, when set, is whether a run takes the entry by its name: a
	// run passes over an entry that does not (controld/apps.ForRun takes
	// only promoted apps).
	runs func(T) bool
}

var (
	imageKind = catalogKind[api.Image]{catalog: images.Images, byID: images.ByID, visible: images.Visible,
		scope: func(i api.Image) (string, string) { return i.ProjectID, i.Project }}
	appKind = catalogKind[api.App]{catalog: apps.Apps, byID: apps.ByID, visible: apps.Visible,
		scope: func(a api.App) (string, string) { return a.ProjectID, a.Project },
		runs:  func(a api.App) bool { return a.Lifecycle == api.ImagePromoted }}
)

// catalogRef is how a request names an entry: ref, its id or name;
// project, the project named (-p/--project); platform, the platform's
// (--platform); runOrder, a name seen in both scopes is the project's, as
// a run resolves it (api.AppRef.RunOrder), not refused.
type catalogRef struct {
	ref, project       string
	platform, runOrder bool
}

// findEntry returns the entry r names that the caller may see (else
// not_found, as for one that does not exist), and the caller as Decide
// sees them. A name is looked up in the project named, or among the
// platform's with platform; with neither, in the caller's project (the
// header, their default) and the platform's, and a name the caller sees
// in both is refused naming both: which one a lifecycle verb moves is the
// caller's to say (docs/apps.md, "Publishing apps"). lock takes the rows
// read for the rest of the transaction.
func findEntry[T any](ctx context.Context, s *Server, q store.Querier, c *call, k catalogKind[T], r catalogRef, lock bool) (T, images.Actor, error) {
	var zero T
	ref := strings.TrimSpace(r.ref)
	if r.platform && r.project != "" {
		return zero, images.Actor{}, api.Errorf(api.CodeInvalidArgument, "a %s is the platform's or a project's, not both", k.catalog.Noun).
			WithHint("drop --platform or -p/--project")
	}
	where := images.Where{Platform: r.project == ""}
	if !r.platform {
		pid, err := s.imageProjectID(ctx, q, c, r.project)
		if err != nil {
			return zero, images.Actor{}, err
		}
		where.ProjectID = pid
	}
	found, err := k.catalog.IDs(ctx, q, ref, where)
	if err != nil {
		return zero, images.Actor{}, err
	}
	var seen []T
	var actors []images.Actor
	for _, id := range found {
		e, err := k.byID(ctx, q, id, lock)
		if errors.Is(err, api.ErrNotFound) {
			continue
		}
		if err != nil {
			return zero, images.Actor{}, err
		}
		pid, _ := k.scope(e)
		if (r.platform && pid != "") || (r.project != "" && pid != where.ProjectID) {
			continue // an id of an entry outside the scope asked for
		}
		who, err := catalogActor(ctx, q, c, pid)
		if err != nil {
			return zero, images.Actor{}, err
		}
		if k.visible(e, who) {
			seen, actors = append(seen, e), append(actors, who)
		}
	}
	switch len(seen) {
	case 0:
		return zero, images.Actor{}, k.catalog.NotFound(ref)
	case 1:
		return seen[0], actors[0], nil
	}
	if r.runOrder {
		for i, e := range seen {
			if k.runs == nil || k.runs(e) {
				return e, actors[i], nil
			}
		}
		return seen[0], actors[0], nil
	}
	// IDs returns the project's entry first, the platform's second (both
	// nouns, image and app, take "an").
	_, pname := k.scope(seen[0])
	return zero, images.Actor{}, api.Errorf(api.CodeInvalidArgument,
		"%s is both a platform %s and an %s of project %s: say --platform or --project", ref, k.catalog.Noun, k.catalog.Noun, pname).
		WithHint("add --platform for the platform's, or -p " + pname + " for the project's")
}

// publishScope is the scope a publish adds its entry to: the platform's
// with platform, else the project named (the header, the caller's
// default), which the caller must be able to read; who may publish there
// is Decide's.
func (s *Server) publishScope(ctx context.Context, q store.Querier, c *call, named string, platform bool) (scope, projectID, projectName string, err error) {
	if platform {
		return api.ImageScopePlatform, "", "", nil
	}
	ref, err := s.projectRef(ctx, c, named)
	if err != nil {
		return "", "", "", err
	}
	if ref == "" {
		return "", "", "", api.Errorf(api.CodeInvalidArgument, "publish into which project?").
			WithHint("pass -p/--project, or --platform (operators)")
	}
	p, err := project.Authorize(ctx, q, ref, c.principal.UserID, platformRole(c), project.AccessRead)
	if err != nil {
		return "", "", "", err
	}
	return api.ImageScopeProject, p.ID, p.Name, nil
}

// catalogEffect is a catalog change's audit row and its one event, told
// to the members of the entry's project when it is a project's own.
func catalogEffect(ctx context.Context, q store.Querier, endpoint, targetType, kind, id, projectID string, payload any,
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
