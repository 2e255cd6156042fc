package images_test

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

var (
	operator = images.Actor{PlatformRole: api.RoleOperator}
	admin    = images.Actor{PlatformRole: api.RoleAdmin, Access: project.AccessAdmin}
	owner    = images.Actor{PlatformRole: api.RoleUser, Access: project.AccessAdmin}
	member   = images.Actor{PlatformRole: api.RoleUser, Access: project.AccessWrite}
	viewer   = images.Actor{PlatformRole: api.RoleUser, Access: project.AccessRead}
	stranger = images.Actor{PlatformRole: api.RoleUser}
)

func img(scope, lifecycle, trust string) api.Image {
	i := api.Image{Name: "tiny", Scope: scope, Lifecycle: lifecycle, Trust: trust}
	if scope == api.ImageScopeProject {
		i.ProjectID, i.Project = "p-1", "research"
	}
	return i
}

func TestDecide(t *testing.T) {
	const plat, proj = api.ImageScopePlatform, api.ImageScopeProject
	tests := []struct {
		name   string
		img    api.Image
		action images.Action
		who    images.Actor
		want   images.Move
		code   error // nil: allowed
	}{
		{"operator promotes a verified platform image", img(plat, api.ImagePublished, api.TrustVerified), images.ActPromote, operator,
			images.Move{api.ImagePromoted, api.TrustVerified}, nil},
		{"promote of an unverified image", img(plat, api.ImagePublished, api.TrustUnverified), images.ActPromote, operator, images.Move{}, api.ErrConflict},
		{"promote of a failed image", img(plat, api.ImagePublished, api.TrustFailedVerification), images.ActPromote, admin, images.Move{}, api.ErrConflict},
		{"promote of a revoked image", img(proj, api.ImageDeprecated, api.TrustRevoked), images.ActPromote, owner, images.Move{}, api.ErrConflict},
		{"promote again", img(plat, api.ImagePromoted, api.TrustVerified), images.ActPromote, operator, images.Move{}, api.ErrConflict},
		{"re-promote a deprecated image", img(plat, api.ImageDeprecated, api.TrustVerified), images.ActPromote, operator,
			images.Move{api.ImagePromoted, api.TrustVerified}, nil},
		{"promote a retired image", img(plat, api.ImageRetired, api.TrustVerified), images.ActPromote, operator, images.Move{}, api.ErrConflict},
		{"a user promotes a platform image", img(plat, api.ImagePublished, api.TrustVerified), images.ActPromote, owner, images.Move{}, api.ErrForbidden},
		{"a member promotes the project's image", img(proj, api.ImagePublished, api.TrustVerified), images.ActPromote, member, images.Move{}, api.ErrForbidden},
		{"an owner promotes the project's image", img(proj, api.ImagePublished, api.TrustVerified), images.ActPromote, owner,
			images.Move{api.ImagePromoted, api.TrustVerified}, nil},
		{"an operator promotes a project's image", img(proj, api.ImagePublished, api.TrustVerified), images.ActPromote, operator, images.Move{}, api.ErrForbidden},
		{"a member verifies the project's image", img(proj, api.ImagePublished, api.TrustUnverified), images.ActVerify, member,
			images.Move{api.ImagePublished, api.TrustUnverified}, nil},
		{"a viewer verifies", img(proj, api.ImagePublished, api.TrustUnverified), images.ActVerify, viewer, images.Move{}, api.ErrForbidden},
		{"verify a revoked image", img(plat, api.ImagePromoted, api.TrustRevoked), images.ActVerify, operator, images.Move{}, api.ErrConflict},
		{"verify a retired image", img(plat, api.ImageRetired, api.TrustVerified), images.ActVerify, operator, images.Move{}, api.ErrConflict},
		{"re-verify a failed image", img(plat, api.ImagePromoted, api.TrustFailedVerification), images.ActVerify, operator,
			images.Move{api.ImagePromoted, api.TrustFailedVerification}, nil},
		{"deprecate a promoted image", img(plat, api.ImagePromoted, api.TrustVerified), images.ActDeprecate, operator,
			images.Move{api.ImageDeprecated, api.TrustVerified}, nil},
		{"deprecate a published image", img(proj, api.ImagePublished, api.TrustUnverified), images.ActDeprecate, owner,
			images.Move{api.ImageDeprecated, api.TrustUnverified}, nil},
		{"deprecate again", img(plat, api.ImageDeprecated, api.TrustVerified), images.ActDeprecate, operator, images.Move{}, api.ErrConflict},
		{"retire a deprecated image", img(plat, api.ImageDeprecated, api.TrustVerified), images.ActRetire, admin,
			images.Move{api.ImageRetired, api.TrustVerified}, nil},
		{"retire again", img(plat, api.ImageRetired, api.TrustVerified), images.ActRetire, admin, images.Move{}, api.ErrConflict},
		{"a member retires", img(proj, api.ImagePublished, api.TrustVerified), images.ActRetire, member, images.Move{}, api.ErrForbidden},
		{"revoke leaves the lifecycle", img(plat, api.ImagePromoted, api.TrustVerified), images.ActRevoke, operator,
			images.Move{api.ImagePromoted, api.TrustRevoked}, nil},
		{"an operator revokes a project's image", img(proj, api.ImagePromoted, api.TrustVerified), images.ActRevoke, operator,
			images.Move{api.ImagePromoted, api.TrustRevoked}, nil},
		{"a member revokes", img(proj, api.ImagePromoted, api.TrustVerified), images.ActRevoke, member, images.Move{}, api.ErrForbidden},
		{"revoke again", img(plat, api.ImagePromoted, api.TrustRevoked), images.ActRevoke, operator, images.Move{}, api.ErrConflict},
		{"a user publishes on the platform", img(plat, "", ""), images.ActPublish, owner, images.Move{}, api.ErrForbidden},
		{"a member publishes in the project", img(proj, "", ""), images.ActPublish, member,
			images.Move{api.ImagePublished, api.TrustUnverified}, nil},
		{"unknown action", img(plat, api.ImagePublished, api.TrustVerified), images.Action("bless"), operator, images.Move{}, api.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := images.Decide(tt.img, tt.action, tt.who)
			if tt.code != nil {
				if !errors.Is(err, tt.code) {
					t.Fatalf("err: got %v; want %v", err, tt.code)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	const plat, proj = api.ImageScopePlatform, api.ImageScopeProject
	tests := []struct {
		name string
		img  api.Image
		who  images.Actor
		want bool
	}{
		{"promoted verified platform image to a stranger", img(plat, api.ImagePromoted, api.TrustVerified), stranger, true},
		{"published platform image to a user", img(plat, api.ImagePublished, api.TrustVerified), owner, false},
		{"promoted revoked platform image to a user", img(plat, api.ImagePromoted, api.TrustRevoked), owner, false},
		{"unverified platform image to an operator", img(plat, api.ImagePublished, api.TrustUnverified), operator, true},
		{"project image to a viewer", img(proj, api.ImagePublished, api.TrustUnverified), viewer, true},
		{"project image to a stranger", img(proj, api.ImagePromoted, api.TrustVerified), stranger, false},
	}
	for _, tt := range tests {
		if got := images.Visible(tt.img, tt.who); got != tt.want {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}
