package images

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Registry is what the image endpoints need of the OCI registry
// (internal/registry.Client): its address, whether a reference is in it,
// and what a reference names now.
type Registry interface {
	Addr() string
	InRegistry(ref string) error
	Resolve(ctx context.Context, ref string) (repo, digest string, err error)
}

// Deps is what the image catalog's endpoints use of the server.
type Deps struct {
	DB       store.Querier
	Registry Registry
	// RunPrice is the own price per hour a run of the image of digest
	// carries (controld/apps.RunPrice with no app): image.get's run
	// order quotes it. Handed in: apps imports images.
	RunPrice func(ctx context.Context, q store.Querier, digest string) (*api.RunPrice, error)
	Now      func() time.Time
}

// Endpoints are the image catalog's (docs/images.md). Who may make which
// move is Decide's; resolving a tag happens before the mutation's
// transaction, once the caller was found allowed, and its result is
// recorded inside it after the decision is taken again on the locked row.
// Verifying runs in the background (Verifier), queued by image.verify.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(api.OpImageList, h.list),
		endpoint.Query(api.OpImageGet, h.get),
		endpoint.Query(api.OpImageRegistry, h.registry),
		endpoint.Mutation(api.OpImagePublish, h.publish),
		endpoint.Mutation(api.OpImageVerify, h.verify),
		endpoint.Mutation(api.OpImagePromote, h.change(ActPromote, api.EndpointImagePromote)),
		endpoint.Mutation(api.OpImageDeprecate, h.change(ActDeprecate, api.EndpointImageDeprecate)),
		endpoint.Mutation(api.OpImageRetire, h.change(ActRetire, api.EndpointImageRetire)),
		endpoint.Mutation(api.OpImageRevoke, h.change(ActRevoke, api.EndpointImageRevoke)),
	}
}

type handlers struct{ Deps }

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.ImageListRequest) (*api.ImageListResponse, error) {
	if req.All && !IsOperator(r) {
		return nil, api.Errorf(api.CodeForbidden, "only operators and admins list every image").WithHint("drop --all")
	}
	pid := ""
	if !req.All {
		ref, err := project.Ref(ctx, h.DB, r, req.Project)
		if err != nil {
			return nil, err
		}
		if ref != "" {
			p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, PlatformRole(r), project.AccessRead)
			if err != nil {
				return nil, err
			}
			pid = p.ID
		}
	}
	out, err := List(ctx, h.DB, pid, req.All)
	if err != nil {
		return nil, err
	}
	return &api.ImageListResponse{Images: out}, nil
}

func (h handlers) get(ctx context.Context, r *endpoint.Request, req api.ImageRef) (*api.Image, error) {
	img, _, err := FindEntry(ctx, h.DB, r, ImageKind, Ref{Ref: req.Image, Project: req.Project, Platform: req.Platform, RunOrder: req.RunOrder}, false)
	if err != nil {
		return nil, err
	}
	if req.RunOrder { // the run's check: what it would be charged
		if img.RunPrice, err = h.RunPrice(ctx, h.DB, img.Digest); err != nil {
			return nil, err
		}
	}
	return &img, nil
}

func (h handlers) registry(_ context.Context, _ *endpoint.Request, _ api.Empty) (*api.ImageRegistryResponse, error) {
	return &api.ImageRegistryResponse{Registry: h.Registry.Addr()}, nil
}

// publishTarget is the image a publish would add, for Decide: the
// platform's, or the project's (resolved and the caller's role read).
func publishTarget(ctx context.Context, q store.Querier, r *endpoint.Request, req api.ImagePublishRequest) (api.Image, error) {
	img := api.Image{Name: req.Name}
	var err error
	if img.Scope, img.ProjectID, img.Project, err = PublishScope(ctx, q, r, req.Project, req.Platform); err != nil {
		return img, err
	}
	who, err := CatalogActor(ctx, q, r, img.ProjectID)
	if err != nil {
		return img, err
	}
	_, err = Decide(img, ActPublish, who)
	return img, err
}

func (h handlers) publish(ctx context.Context, r *endpoint.Request, req api.ImagePublishRequest) (endpoint.Work[api.Image], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := ValidateName(req.Name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Ref) == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "no ref given").WithHint("give --ref REPOSITORY@sha256:…")
	}
	if req.Platform && req.Project != "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "an image is the platform's or a project's, not both").
			WithHint("drop --platform or --project")
	}
	if _, err := publishTarget(ctx, h.DB, r, req); err != nil {
		return nil, err
	}
	if !req.Platform {
		// What a user names, controld fetches: only from its registry.
		if err := h.Registry.InRegistry(req.Ref); err != nil {
			return nil, err
		}
	}
	// The one time a tag is read: what it names now is what is stored.
	repo, digest, err := h.Registry.Resolve(ctx, req.Ref)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Image, mutate.Effect, error) {
		target, err := publishTarget(ctx, tx, r, req)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		src := ""
		if !strings.Contains(req.Ref, "@") {
			src = strings.TrimSpace(req.Ref)
		}
		img, err := Publish(ctx, tx, New{Name: req.Name, ProjectID: target.ProjectID, Repository: repo,
			Digest: digest, Source: src, By: r.Principal.UserID}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := Effect(ctx, tx, api.EndpointImagePublish, img, map[string]any{"ref": img.Ref, "source": src})
		return &img, eff, err
	}, nil
}

// verify queues a verification (RequestVerify): a replica's verifier
// fetches the image without this request's deadline, a multi-gigabyte
// image included, and records the result (RecordVerification); the
// answer carries the pending request.
func (h handlers) verify(_ context.Context, r *endpoint.Request, req api.ImageChangeRequest) (endpoint.Work[api.Image], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Image, mutate.Effect, error) {
		cur, who, err := FindEntry(ctx, tx, r, ImageKind, Ref{Ref: req.Image, Project: req.Project, Platform: req.Platform}, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if _, err := Decide(cur, ActVerify, who); err != nil {
			return nil, mutate.Effect{}, err
		}
		out, err := RequestVerify(ctx, tx, cur.ID, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := Effect(ctx, tx, api.EndpointImageVerify, out,
			map[string]any{"queued": cur.Verification == nil, "trust": cur.Trust})
		return &out, eff, err
	}, nil
}

// maxReason bounds a lifecycle move's reason.
const maxReason = 500

// change is the handler of a move made by a decision alone: promote,
// deprecate, retire, revoke (action, audited as name).
func (h handlers) change(action Action, name string) func(context.Context, *endpoint.Request, api.ImageChangeRequest) (endpoint.Work[api.Image], error) {
	return func(_ context.Context, r *endpoint.Request, req api.ImageChangeRequest) (endpoint.Work[api.Image], error) {
		req.Reason = strings.TrimSpace(req.Reason)
		if len(req.Reason) > maxReason {
			return nil, api.Errorf(api.CodeInvalidArgument, "reason: at most %d characters", maxReason)
		}
		if action == ActRevoke && req.Reason == "" {
			return nil, api.Errorf(api.CodeInvalidArgument, "a revoke needs a reason").WithHint("give --reason \"…\"")
		}
		return func(ctx context.Context, tx pgx.Tx) (*api.Image, mutate.Effect, error) {
			cur, who, err := FindEntry(ctx, tx, r, ImageKind, Ref{Ref: req.Image, Project: req.Project, Platform: req.Platform}, true)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			m, err := Decide(cur, action, who)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			reason := ""
			if action == ActRevoke {
				reason = req.Reason
			}
			out, err := Apply(ctx, tx, cur.ID, m, reason, h.Now())
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			eff, err := Effect(ctx, tx, name, out, map[string]any{
				"lifecycle": []string{cur.Lifecycle, out.Lifecycle}, "trust": []string{cur.Trust, out.Trust}, "reason": req.Reason})
			return &out, eff, err
		}, nil
	}
}
