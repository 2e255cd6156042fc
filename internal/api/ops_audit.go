package api

import "context"

// Endpoints of the audit trail (docs/audit.md). Each is declared here
// once (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointAuditList   = "audit.list"
	EndpointAuditVerify = "ops.audit_verify"
)

var (
	// OpAuditList is audit.list: a page of audit rows matching the
	// filters: every stream for admins, a project's for its owners.
	OpAuditList = NewQuery[AuditListRequest, AuditListResponse](EndpointAuditList, LoggedIn)
	// OpAuditVerify is ops.audit_verify: recomputes every audit stream's
	// hash chain and names each row that breaks it.
	OpAuditVerify = NewQuery[Empty, AuditVerifyResponse](EndpointAuditVerify, AdminOnly)
)

// AuditList reads a page of the audit trail.
func (c *Client) AuditList(ctx context.Context, req AuditListRequest) (*AuditListResponse, error) {
	return Do(ctx, c, OpAuditList, req)
}

// AuditVerify recomputes the audit trail's hash chains.
func (c *Client) AuditVerify(ctx context.Context) (*AuditVerifyResponse, error) {
	return Do(ctx, c, OpAuditVerify, Empty{})
}
