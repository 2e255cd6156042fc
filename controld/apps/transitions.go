package apps

import (
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Action is a change to a published app: one move of its lifecycle.
type Action string

// The actions, by the endpoint that makes them.
const (
	ActPublish   Action = "publish"
	ActPromote   Action = "promote"
	ActDeprecate Action = "deprecate"
	ActRetire    Action = "retire"
)

// Actor is who asks: their platform role, and their access in the app's
// project (for a project's own app); the image catalog's, as both
// catalogs see a caller alike.
type Actor = images.Actor

// Visible reports whether the actor may see app at all: operators every
// app, a project's members (any role) its own, everyone the platform's
// promoted apps.
func Visible(app api.App, who Actor) bool {
	switch {
	case who.Operator():
		return true
	case app.Scope == api.ImageScopeProject:
		return who.Access >= project.AccessRead
	default:
		return app.Lifecycle == api.ImagePromoted
	}
}

// Allowed says whether the actor may make action on app: operators and
// admins on the platform's apps, a project's owners (and platform admins)
// on its own. A project's members run its apps; they do not publish them:
// what a project offers is its owners' call.
func Allowed(app api.App, action Action, who Actor) error {
	if app.Scope == api.ImageScopePlatform {
		if !who.Operator() {
			return api.Errorf(api.CodeForbidden, "only operators and admins may %s platform app %s", action, app.Name)
		}
		return nil
	}
	if who.Access >= project.AccessAdmin {
		return nil
	}
	return api.Errorf(api.CodeForbidden, "only the owners of project %s may %s its app %s", app.Project, action, app.Name).
		WithHint("ask a project owner")
}

// Decide checks that action is a legal move of app's lifecycle and that
// the actor may make it, and returns the lifecycle after it. Only an app
// whose image is verified is promoted: the trust is the image's
// (docs/decisions/0051-published-apps.md).
func Decide(app api.App, action Action, who Actor) (string, error) {
	if err := Allowed(app, action, who); err != nil {
		return "", err
	}
	retired := app.Lifecycle == api.ImageRetired
	switch action {
	case ActPublish:
		return api.ImagePublished, nil
	case ActPromote:
		switch {
		case retired:
			return "", conflict(app, "is retired", "")
		case app.Lifecycle == api.ImagePromoted:
			return "", conflict(app, "is already promoted", "")
		case app.Trust != api.TrustVerified:
			return "", conflict(app, "runs image "+app.Image+", which is "+app.Trust+": only an app of a verified image is promoted",
				"verify the image first: `gpuaas image verify "+app.Image+"`")
		}
		return api.ImagePromoted, nil
	case ActDeprecate:
		if app.Lifecycle == api.ImagePublished || app.Lifecycle == api.ImagePromoted {
			return api.ImageDeprecated, nil
		}
		return "", conflict(app, "is already "+app.Lifecycle, "")
	case ActRetire:
		if retired {
			return "", conflict(app, "is already retired", "")
		}
		return api.ImageRetired, nil
	}
	return "", api.Errorf(api.CodeInvalidArgument, "unknown app action %q", action)
}

// Runnable reports whether a workload may run app now: it is promoted and
// its image is promoted and verified.
func Runnable(app api.App) bool {
	return app.Lifecycle == api.ImagePromoted && app.ImageLifecycle == api.ImagePromoted && app.Trust == api.TrustVerified
}

func conflict(app api.App, what, hint string) error {
	e := api.Errorf(api.CodeConflict, "app %s %s", app.Name, what)
	if hint != "" {
		e = e.WithHint(hint)
	}
	return e
}
