package api

// Endpoints of operator tools under ops.: the outbox, bus identities, SSH CAs
// and the ledger check. Each is declared here once: its name (Subject(name)
// is its subject; audit rows and logs name it so) and its descriptor, with
// its request and response types, access level and kind (endpoint.go,
// docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointBusIdentityAdd    = "ops.bus_identity_add"
	EndpointBusIdentityList   = "ops.bus_identity_list"
	EndpointBusIdentityRevoke = "ops.bus_identity_revoke"
	EndpointCAList            = "ops.ca_list"
	EndpointCARetire          = "ops.ca_retire"
	EndpointCARotate          = "ops.ca_rotate"
	EndpointOpsLedgerVerify   = "ops.ledger_verify"
	EndpointOutboxDrop        = "ops.outbox_drop"
	EndpointOutboxList        = "ops.outbox_list"
	EndpointOutboxRetry       = "ops.outbox_retry"
)

var (
	// OpBusIdentityAdd is ops.bus_identity_add: registers a NATS identity's
	// public key (admins).
	OpBusIdentityAdd = NewMutation[BusIdentityAddRequest, BusIdentity](EndpointBusIdentityAdd, AdminOnly)
	// OpBusIdentityList is ops.bus_identity_list: lists registered NATS
	// identities, revoked ones too (admins).
	OpBusIdentityList = NewQuery[Empty, []BusIdentity](EndpointBusIdentityList, AdminOnly)
	// OpBusIdentityRevoke is ops.bus_identity_revoke: revokes a key or every
	// key of a name and closes their connections (admins).
	OpBusIdentityRevoke = NewMutation[BusIdentityRevokeRequest, BusIdentityRevokeResponse](EndpointBusIdentityRevoke, AdminOnly)
	// OpCAList is ops.ca_list: lists CA keys (operators).
	OpCAList = NewQuery[CAListRequest, CAListResponse](EndpointCAList, OperatorOnly)
	// OpCARetire is ops.ca_retire: stops trusting a CA key (admins):
	// certificates it signed are refused from then on.
	OpCARetire = NewMutation[CARotateRequest, CAListResponse](EndpointCARetire, AdminOnly)
	// OpCARotate is ops.ca_rotate: adds a key to a CA (admins); see
	// CARotateRequest.
	OpCARotate = NewMutation[CARotateRequest, CAListResponse](EndpointCARotate, AdminOnly)
	// OpOpsLedgerVerify is ops.ledger_verify: recomputes every account's hash
	// chain and balance (admins).
	OpOpsLedgerVerify = NewQuery[Empty, LedgerVerifyResponse](EndpointOpsLedgerVerify, AdminOnly)
	// OpOutboxDrop is ops.outbox_drop: gives up on a dead event (admins); it
	// answers the event as it now is.
	OpOutboxDrop = NewMutation[OutboxRef, OutboxEvent](EndpointOutboxDrop, AdminOnly)
	// OpOutboxList is ops.outbox_list: lists outbox events (operators).
	OpOutboxList = NewQuery[OutboxListRequest, OutboxListResponse](EndpointOutboxList, OperatorOnly)
	// OpOutboxRetry is ops.outbox_retry: puts a dead event back in the relay's
	// queue (admins); it answers the event as it now is.
	OpOutboxRetry = NewMutation[OutboxRef, OutboxEvent](EndpointOutboxRetry, AdminOnly)
)
