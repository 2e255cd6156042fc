package controld

import (
	"context"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// auditEndpoints read the audit trail (controld/audit, docs/audit.md).
func (s *Server) auditEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpAuditList, s.auditList),
		query(s, api.OpAuditVerify, s.auditVerify),
	}
}

// maxAuditFilter bounds a filter's text.
const maxAuditFilter = 200

func (s *Server) auditList(ctx context.Context, c *call, req api.AuditListRequest) (*api.AuditListResponse, error) {
	for name, v := range map[string]string{"actor": req.Actor, "action": req.Action, "target": req.Target} {
		if len(v) > maxAuditFilter {
			return nil, api.Errorf(api.CodeInvalidArgument, "--%s is longer than %d bytes", name, maxAuditFilter)
		}
	}
	switch {
	case req.Limit < 0 || req.Limit > api.AuditPageMax:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit %d is not within [1, %d]", req.Limit, api.AuditPageMax)
	case req.After < 0:
		return nil, api.Errorf(api.CodeInvalidArgument, "after %d is negative", req.After)
	case req.Newest && req.After > 0:
		return nil, api.Errorf(api.CodeInvalidArgument, "newest and after exclude each other")
	case req.Since != nil && req.Since.After(s.now().Add(time.Minute)):
		return nil, api.Errorf(api.CodeInvalidArgument, "since %s is in the future", req.Since.Format(time.RFC3339))
	}
	f := audit.Filter{Actor: strings.TrimSpace(req.Actor), Action: strings.TrimSpace(req.Action),
		Target: strings.TrimSpace(req.Target), After: req.After, Newest: req.Newest, Limit: req.Limit}
	if req.Since != nil {
		f.Since = *req.Since
	}
	everything := req.AllProjects || (req.Project == "" && c.project == "" && c.principal.IsAdmin())
	if everything && !c.principal.IsAdmin() {
		return nil, api.Errorf(api.CodeForbidden, "only admins read every project's audit trail").
			WithHint("pass -p/--project with a project you own")
	}
	if !everything {
		ref, err := s.projectRef(ctx, c, strings.TrimSpace(req.Project))
		if err != nil {
			return nil, err
		}
		// Owners read their project's stream; admins any.
		p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, c.principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, err
		}
		f.Streams = []string{p.ID}
	}
	recs, more, err := audit.List(ctx, s.pool, f)
	if err != nil {
		return nil, err
	}
	return &api.AuditListResponse{Records: recs, More: more}, nil
}

func (s *Server) auditVerify(ctx context.Context, _ *call, _ api.Empty) (*api.AuditVerifyResponse, error) {
	return audit.Verify(ctx, s.pool)
}
