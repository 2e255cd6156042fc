package controld

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// imagesEndpoints are the image catalog's (controld/images,
// docs/images.md). Who may make which move is images.Decide's; resolving
// a tag happens before the mutation's transaction, once the caller was
// found allowed, and its result is recorded inside it after the decision
// is taken again on the locked row. Verifying runs in the background
// (images.Verifier), queued by image.verify.
func (s *Server) imagesEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpImageList, s.imageList),
		query(s, api.OpImageGet, s.imageGet),
		query(s, api.OpImageRegistry, s.imageRegistry),
		mutation(s, api.OpImagePublish, s.imagePublish),
		mutation(s, api.OpImageVerify, s.imageVerify),
		mutation(s, api.OpImagePromote, s.imageChange(images.ActPromote, api.EndpointImagePromote)),
		mutation(s, api.OpImageDeprecate, s.imageChange(images.ActDeprecate, api.EndpointImageDeprecate)),
		mutation(s, api.OpImageRetire, s.imageChange(images.ActRetire, api.EndpointImageRetire)),
		mutation(s, api.OpImageRevoke, s.imageChange(images.ActRevoke, api.EndpointImageRevoke)),
	}
}

// platformRole is the caller's platform role as the catalog honours it: a
// session delegated through the SSH gateway acts as a user, as it is
// refused ops.* and operator endpoints (delegatedRefused).
func platformRole(c *call) string {
	if c.principal.Delegated {
		return api.RoleUser
	}
	return c.principal.Role
}

func isOperator(c *call) bool {
	r := platformRole(c)
	return r == api.RoleOperator || r == api.RoleAdmin
}

// imageProjectID is the project whose own images a name refers to: the
// one named, else the caller's (the header, their default); "" for none.
func (s *Server) imageProjectID(ctx context.Context, q store.Querier, c *call, named string) (string, error) {
	ref, err := s.projectRef(ctx, c, named)
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
	p, err := project.Authorize(ctx, q, ref, c.principal.UserID, platformRole(c), project.AccessRead)
	if err != nil {
		return "", err
	}
	return p.ID, nil
}

func (s *Server) imageList(ctx context.Context, c *call, req api.ImageListRequest) (*api.ImageListResponse, error) {
	if req.All && !isOperator(c) {
		return nil, api.Errorf(api.CodeForbidden, "only operators and admins list every image").WithHint("drop --all")
	}
	pid := ""
	if !req.All {
		ref, err := s.projectRef(ctx, c, req.Project)
		if err != nil {
			return nil, err
		}
		if ref != "" {
			p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, platformRole(c), project.AccessRead)
			if err != nil {
				return nil, err
			}
			pid = p.ID
		}
	}
	out, err := images.List(ctx, s.pool, pid, req.All)
	if err != nil {
		return nil, err
	}
	return &api.ImageListResponse{Images: out}, nil
}

func (s *Server) imageGet(ctx context.Context, c *call, req api.ImageRef) (*api.Image, error) {
	img, _, err := findEntry(ctx, s, s.pool, c, imageKind, catalogRef{req.Image, req.Project, req.Platform, req.RunOrder}, false)
	if err != nil {
		return nil, err
	}
	if req.RunOrder { // the run's check: what it would be charged (runPrice)
		if img.RunPrice, err = runPrice(ctx, s.pool, img.Digest, nil); err != nil {
			return nil, err
		}
	}
	return &img, nil
}

func (s *Server) imageRegistry(_ context.Context, _ *call, _ api.Empty) (*api.ImageRegistryResponse, error) {
	return &api.ImageRegistryResponse{Registry: s.registry.Addr()}, nil
}

// imagePublishTarget is the image a publish would add, for Decide: the
// platform's, or the project's (resolved and the caller's role read).
func (s *Server) imagePublishTarget(ctx context.Context, q store.Querier, c *call, req api.ImagePublishRequest) (api.Image, error) {
	img := api.Image{Name: req.Name}
	var err error
	if img.Scope, img.ProjectID, img.Project, err = s.publishScope(ctx, q, c, req.Project, req.Platform); err != nil {
		return img, err
	}
	who, err := catalogActor(ctx, q, c, img.ProjectID)
	if err != nil {
		return img, err
	}
	_, err = images.Decide(img, images.ActPublish, who)
	return img, err
}

func (s *Server) imagePublish(ctx context.Context, c *call, req api.ImagePublishRequest) (work[api.Image], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := images.ValidateName(req.Name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Ref) == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "no ref given").WithHint("give --ref REPOSITORY@sha256:…")
	}
	if req.Platform && req.Project != "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "an image is the platform's or a project's, not both").
			WithHint("drop --platform or --project")
	}
	if _, err := s.imagePublishTarget(ctx, s.pool, c, req); err != nil {
		return nil, err
	}
	if !req.Platform {
		// What a user names, controld fetches: only from its registry.
		if err := s.registry.InRegistry(req.Ref); err != nil {
			return nil, err
		}
	}
	// The one time a tag is read: what it names now is what is stored.
	repo, digest, err := s.registry.Resolve(ctx, req.Ref)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Image, mutate.Effect, error) {
		target, err := s.imagePublishTarget(ctx, tx, c, req)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		src := ""
		if !strings.Contains(req.Ref, "@") {
			src = strings.TrimSpace(req.Ref)
		}
		img, err := images.Publish(ctx, tx, images.New{Name: req.Name, ProjectID: target.ProjectID, Repository: repo,
			Digest: digest, Source: src, By: c.principal.UserID}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := imageEffect(ctx, tx, api.EndpointImagePublish, img, map[string]any{"ref": img.Ref, "source": src})
		return &img, eff, err
	}, nil
}

// imageVerify queues a verification (images.RequestVerify): a replica's
// verifier fetches the image without this request's deadline, a
// multi-gigabyte image included, and records the result
// (recordVerification); the answer carries the pending request.
func (s *Server) imageVerify(_ context.Context, c *call, req api.ImageChangeRequest) (work[api.Image], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Image, mutate.Effect, error) {
		cur, who, err := findEntry(ctx, s, tx, c, imageKind, catalogRef{req.Image, req.Project, req.Platform, false}, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if _, err := images.Decide(cur, images.ActVerify, who); err != nil {
			return nil, mutate.Effect{}, err
		}
		out, err := images.RequestVerify(ctx, tx, cur.ID, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := imageEffect(ctx, tx, api.EndpointImageVerify, out,
			map[string]any{"queued": cur.Verification == nil, "trust": cur.Trust})
		return &out, eff, err
	}, nil
}

// recordVerification writes the audit row and the event of a finished
// verification (images.Verifier's Record), as its asker's act.
func recordVerification(now func() time.Time) func(context.Context, pgx.Tx, api.Image, api.Image, images.Claim, images.Outcome) error {
	return func(ctx context.Context, tx pgx.Tx, before, after api.Image, c images.Claim, o images.Outcome) error {
		eff, err := imageEffect(ctx, tx, api.EndpointImageVerify, after, map[string]any{"outcome": o,
			"from": before.Trust, "to": after.Trust, "reason": after.TrustReason, "attempts": c.Attempt})
		if err != nil {
			return err
		}
		at := now()
		if err := audit.Write(ctx, tx, audit.Meta{At: at, ActorID: c.RequestedBy, CorrelationID: corrid.New()}, eff.Audit); err != nil {
			return err
		}
		for _, ev := range eff.Events {
			if _, err := outbox.Enqueue(ctx, tx, at, ev); err != nil {
				return err
			}
		}
		return nil
	}
}

// imageChange is the handler of a move made by a decision alone: promote,
// deprecate, retire, revoke.
func (s *Server) imageChange(action images.Action, endpoint string) func(context.Context, *call, api.ImageChangeRequest) (work[api.Image], error) {
	return func(_ context.Context, c *call, req api.ImageChangeRequest) (work[api.Image], error) {
		req.Reason = strings.TrimSpace(req.Reason)
		if len(req.Reason) > 500 {
			return nil, api.Errorf(api.CodeInvalidArgument, "reason: at most 500 characters")
		}
		if action == images.ActRevoke && req.Reason == "" {
			return nil, api.Errorf(api.CodeInvalidArgument, "a revoke needs a reason").WithHint("give --reason \"…\"")
		}
		return func(ctx context.Context, tx pgx.Tx) (*api.Image, mutate.Effect, error) {
			cur, who, err := findEntry(ctx, s, tx, c, imageKind, catalogRef{req.Image, req.Project, req.Platform, false}, true)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			m, err := images.Decide(cur, action, who)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			reason := ""
			if action == images.ActRevoke {
				reason = req.Reason
			}
			out, err := images.Apply(ctx, tx, cur.ID, m, reason, s.now())
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			eff, err := imageEffect(ctx, tx, endpoint, out, map[string]any{
				"lifecycle": []string{cur.Lifecycle, out.Lifecycle}, "trust": []string{cur.Trust, out.Trust}, "reason": req.Reason})
			return &out, eff, err
		}, nil
	}
}

// imageEffect is an image change's audit row and its one event, told to
// the members of a project-private image's project.
func imageEffect(ctx context.Context, q store.Querier, endpoint string, img api.Image, detail map[string]any) (mutate.Effect, error) {
	return catalogEffect(ctx, q, endpoint, "image", api.EventImage, img.ID, img.ProjectID, img, detail)
}
