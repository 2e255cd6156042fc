package api

// Endpoints of nodes and their slots (operators). Each is declared here once:
// its name (Subject(name) is its subject; audit rows and logs name it so)
// and its descriptor, with its request and response types, access level and
// kind (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointNodeClear      = "node.clear"
	EndpointNodeDrain      = "node.drain"
	EndpointNodeEnroll     = "node.enroll"
	EndpointNodeGet        = "node.get"
	EndpointNodeList       = "node.list"
	EndpointNodeLogs       = "node.logs"
	EndpointNodeQuarantine = "node.quarantine"
	EndpointSlotsApprove   = "node.slots_approve"
)

var (
	// OpNodeClear is node.clear: clears slot quarantines (operators).
	OpNodeClear = NewMutation[NodeClearRequest, NodeDetail](EndpointNodeClear, OperatorOnly)
	// OpNodeDrain is node.drain: stops new placements on a node (operators).
	OpNodeDrain = NewMutation[NodeRef, Node](EndpointNodeDrain, OperatorOnly)
	// OpNodeEnroll is node.enroll: creates a one-time enrollment token for a
	// new node (operators).
	OpNodeEnroll = NewSecretMutation[EnrollTokenRequest, EnrollTokenResponse](EndpointNodeEnroll, OperatorOnly)
	// OpNodeGet is node.get: returns a node with its slots (operators).
	OpNodeGet = NewQuery[NodeRef, NodeDetail](EndpointNodeGet, OperatorOnly)
	// OpNodeList is node.list: lists nodes (operators).
	OpNodeList = NewQuery[Empty, NodeListResponse](EndpointNodeList, OperatorOnly)
	// OpNodeLogs is node.logs: returns a node's recent hostd log records
	// (operators).
	OpNodeLogs = NewQuery[NodeLogsRequest, NodeLogsResponse](EndpointNodeLogs, OperatorOnly)
	// OpNodeQuarantine is node.quarantine: quarantines a slot (operators).
	OpNodeQuarantine = NewMutation[NodeQuarantineRequest, NodeDetail](EndpointNodeQuarantine, OperatorOnly)
	// OpSlotsApprove is node.slots_approve: approves pending slots
	// (operators).
	OpSlotsApprove = NewMutation[SlotsApproveRequest, NodeDetail](EndpointSlotsApprove, OperatorOnly)
)
