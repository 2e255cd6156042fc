// Package auditapi serves the audit trail's endpoints (docs/audit.md). It
// is apart from package audit because every mutation writes its audit row
// through audit (controld/mutate imports it), and endpoints are declared
// with controld/endpoint, which imports mutate
// (docs/decisions/0069-domain-endpoints.md).
package auditapi

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DB is what the reads need of the database: queries, and a read-only
// snapshot for verify (a pool meets it).
type DB interface {
	store.Querier
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Deps are what the audit trail's endpoints need of the server.
type Deps struct {
	DB  DB
	Now func() time.Time
}

// Endpoints read the audit trail.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(api.OpAuditList, h.list),
		endpoint.Query(api.OpAuditVerify, h.verify),
	}
}

type handlers struct{ Deps }

// maxFilter bounds a filter's text.
const maxFilter = 200

// list reads one page of the audit trail: a project's stream for its
// owners (and admins), every stream for admins alone.
func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.AuditListRequest) (*api.AuditListResponse, error) {
	for name, v := range map[string]string{"actor": req.Actor, "action": req.Action, "target": req.Target} {
		if len(v) > maxFilter {
			return nil, api.Errorf(api.CodeInvalidArgument, "--%s is longer than %d bytes", name, maxFilter)
		}
	}
	switch {
	case req.Limit < 0 || req.Limit > api.AuditPageMax:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit %d is not within [1, %d]", req.Limit, api.AuditPageMax)
	case req.After < 0:
		return nil, api.Errorf(api.CodeInvalidArgument, "after %d is negative", req.After)
	case req.Newest && req.After > 0:
		return nil, api.Errorf(api.CodeInvalidArgument, "newest and after exclude each other")
	case req.Since != nil && req.Since.After(h.Now().Add(time.Minute)):
		return nil, api.Errorf(api.CodeInvalidArgument, "since %s is in the future", req.Since.Format(time.RFC3339))
	}
	f := audit.Filter{Actor: strings.TrimSpace(req.Actor), Action: strings.TrimSpace(req.Action),
		Target: strings.TrimSpace(req.Target), After: req.After, Newest: req.Newest, Limit: req.Limit}
	if req.Since != nil {
		f.Since = *req.Since
	}
	everything := req.AllProjects || (req.Project == "" && r.Project == "" && r.Principal.IsAdmin())
	if everything && !r.Principal.IsAdmin() {
		return nil, api.Errorf(api.CodeForbidden, "only admins read every project's audit trail").
			WithHint("pass -p/--project with a project you own")
	}
	if !everything {
		ref, err := project.Ref(ctx, h.DB, r, strings.TrimSpace(req.Project))
		if err != nil {
			return nil, err
		}
		// Owners read their project's stream; admins any.
		p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, err
		}
		f.Streams = []string{p.ID}
	}
	recs, more, err := audit.List(ctx, h.DB, f)
	if err != nil {
		return nil, err
	}
	return &api.AuditListResponse{Records: recs, More: more}, nil
}

func (h handlers) verify(ctx context.Context, _ *endpoint.Request, _ api.Empty) (*api.AuditVerifyResponse, error) {
	return audit.Verify(ctx, h.DB)
}
