package exposures

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// link mints a one-time link for a browser into an exposure the caller
// may open now (the verdict gate.authorize_http would give their
// session). It is bound to the caller's login: the front's cookie ends
// with it. Machine tokens get none (tokenEndpoints): a browser is a
// person's. Audited as the credential it is.
func (h handlers) link(ctx context.Context, r *endpoint.Request, req api.ExposeLinkRequest) (*api.ExposeLinkResponse, error) {
	allocID, port, ok := api.ParseExposureHost(strings.ToLower(strings.TrimSpace(req.Host)))
	if !ok {
		return nil, api.Errorf(api.CodeInvalidArgument, "host: %q is not <port>-<allocation>", req.Host).
			WithHint("give the exposure's URL, as `gpuaas expose list` shows it")
	}
	path, err := CheckLinkPath(req.Path)
	if err != nil {
		return nil, err
	}
	v, _, err := h.Verdict(ctx, h.DB, allocID, port, gateproto.GateAuthorizeHTTPRequest{Host: req.Host,
		SessionID: r.Principal.SessionID, UserID: r.Principal.UserID})
	if err != nil {
		return nil, err
	}
	switch v.Verdict {
	case gateproto.VerdictAllow:
	case gateproto.VerdictNotFound, gateproto.VerdictGone:
		return nil, api.Errorf(api.CodeNotFound, "%s", v.Reason).WithHint("see `gpuaas expose list`")
	default:
		return nil, api.Errorf(api.CodeForbidden, "%s", v.Reason)
	}
	var resp api.ExposeLinkResponse
	err = h.Audited(ctx, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error {
		*e = audit.Entry{Action: api.EndpointExposeLink, TargetType: "exposure", TargetID: v.Exposure.ID,
			ProjectID: v.Exposure.ProjectID, Detail: map[string]any{"session_id": r.Principal.SessionID, "path": path}}
		var err error
		resp, err = MintLink(ctx, tx, *v.Exposure, r.Principal.UserID, r.Principal.SessionID, path, h.Now())
		return err
	})
	return &resp, err
}
