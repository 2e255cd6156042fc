package images

import (
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Action is a change to an image: one move in one of its two state
// machines (docs/images.md, "States").
type Action string

// The actions, by the endpoint that makes them.
const (
	ActPublish   Action = "publish"
	ActVerify    Action = "verify"
	ActPromote   Action = "promote"
	ActDeprecate Action = "deprecate"
	ActRetire    Action = "retire"
	ActRevoke    Action = "revoke"
)

// Actor is who asks: their platform role, and their access in the
// entry's project (for a project's own image or app; project.AccessFor of
// their role). controld/apps decides with it too.
type Actor struct {
	PlatformRole string
	Access       project.Access
}

// Operator reports whether the actor runs the platform.
func (a Actor) Operator() bool {
	return a.PlatformRole == api.RoleOperator || a.PlatformRole == api.RoleAdmin
}

// Move is the states an image is in after an action; for ActVerify the
// trust is decided by the check (Verified).
type Move struct {
	Lifecycle, Trust string
}

// Visible reports whether the actor may see img at all: operators see every
// image, a project's members (any role) its own, and everyone the platform's
// promoted and verified images.
func Visible(img api.Image, who Actor) bool {
	switch {
	case who.Operator():
		return true
	case img.Scope == api.ImageScopeProject:
		return who.Access >= project.AccessRead
	default:
		return img.Lifecycle == api.ImagePromoted && img.Trust == api.TrustVerified
	}
}

// Allowed says whether the actor may make action on img (visible to them):
// operators and admins on platform images; on a project's own, members
// publish and verify, owners (and platform admins) move its lifecycle and
// revoke it. Operators may revoke any image: trust is the platform's call.
func Allowed(img api.Image, action Action, who Actor) error {
	if img.Scope == api.ImageScopePlatform {
		if !who.Operator() {
			return api.Errorf(api.CodeForbidden, "only operators and admins may %s platform image %s", action, img.Name)
		}
		return nil
	}
	switch {
	case action == ActRevoke && who.Operator():
		return nil
	case action == ActPublish || action == ActVerify:
		if who.Access >= project.AccessWrite {
			return nil
		}
		return api.Errorf(api.CodeForbidden, "your role in project %s does not allow you to %s images", img.Project, action)
	case who.Access >= project.AccessAdmin:
		return nil
	}
	return api.Errorf(api.CodeForbidden, "only the owners of project %s may %s its image %s", img.Project, action, img.Name).
		WithHint("ask a project owner")
}

// Decide checks that action is a legal move from img's states and that the
// actor may make it, and returns the states after it. The two machines are
// independent: a failed or revoked trust leaves the lifecycle as it is, and
// only promotion looks at trust (only a verified image is promoted).
func Decide(img api.Image, action Action, who Actor) (Move, error) {
	if err := Allowed(img, action, who); err != nil {
		return Move{}, err
	}
	m := Move{Lifecycle: img.Lifecycle, Trust: img.Trust}
	retired := img.Lifecycle == api.ImageRetired
	switch action {
	case ActPublish:
		return Move{Lifecycle: api.ImagePublished, Trust: api.TrustUnverified}, nil
	case ActVerify:
		switch {
		case img.Trust == api.TrustRevoked:
			return m, conflict(img, "is revoked for good", "publish the image again under a new name")
		case retired:
			return m, conflict(img, "is retired", "")
		}
		return m, nil
	case ActPromote:
		switch {
		case retired:
			return m, conflict(img, "is retired", "")
		case img.Lifecycle == api.ImagePromoted:
			return m, conflict(img, "is already promoted", "")
		case img.Trust != api.TrustVerified:
			return m, conflict(img, "is "+img.Trust+": only a verified image is promoted", "run `gpuaas image verify "+img.Name+"` first")
		}
		m.Lifecycle = api.ImagePromoted
	case ActDeprecate:
		switch img.Lifecycle {
		case api.ImagePublished, api.ImagePromoted:
			m.Lifecycle = api.ImageDeprecated
		default:
			return m, conflict(img, "is already "+img.Lifecycle, "")
		}
	case ActRetire:
		if retired {
			return m, conflict(img, "is already retired", "")
		}
		m.Lifecycle = api.ImageRetired
	case ActRevoke:
		if img.Trust == api.TrustRevoked {
			return m, conflict(img, "is already revoked", "")
		}
		m.Trust = api.TrustRevoked
	default:
		return m, api.Errorf(api.CodeInvalidArgument, "unknown image action %q", action)
	}
	return m, nil
}

// Verified is the trust after a check of img: verified when it passed,
// failed_verification otherwise (the lifecycle is not touched).
func Verified(ok bool) string {
	if ok {
		return api.TrustVerified
	}
	return api.TrustFailedVerification
}

func conflict(img api.Image, what, hint string) error {
	e := api.Errorf(api.CodeConflict, "image %s %s", img.Name, what)
	if hint != "" {
		e = e.WithHint(hint)
	}
	return e
}
