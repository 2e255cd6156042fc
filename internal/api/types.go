package api

import (
	"encoding/json"
	"time"
)

// Platform roles.
const (
	RoleUser     = "user"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// Project roles.
const (
	ProjectOwner  = "owner"
	ProjectMember = "member"
	ProjectViewer = "viewer"
)

// Shapes of what can be rented.
const (
	ShapeBaremetal = "baremetal"
	ShapeGPUSlice  = "gpu_slice"
)

// User is a person known to controld.
type User struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name,omitempty"`
	Role      string    `json:"role"`
	Provider  string    `json:"provider"`
	CreatedAt time.Time `json:"created_at"`
}

// LoginRequest logs in with the local provider. With Invite, it redeems
// an invitation instead: Password becomes the invited user's password
// (Email may then be empty; when given it must be the invited one).
type LoginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Invite   string `json:"invite,omitempty"`
}

// ExchangeRequest trades an OIDC ID token for a session token.
type ExchangeRequest struct {
	IDToken string `json:"id_token"`
	// Nonce is the nonce the client sent in its authorization request
	// (code flow); the ID token must carry the same. The device flow has
	// none.
	Nonce string `json:"nonce,omitempty"`
}

// LoginResponse carries a fresh session token.
type LoginResponse struct {
	Token     string    `json:"token"`
	SessionID string    `json:"session_id"`
	ExpiresAt time.Time `json:"expires_at"`
	User      User      `json:"user"`
}

// LogoutResponse confirms that a session was revoked.
type LogoutResponse struct {
	SessionID string `json:"session_id"`
}

// WhoamiResponse describes the caller.
type WhoamiResponse struct {
	User      User      `json:"user"`
	SessionID string    `json:"session_id"`
	ExpiresAt time.Time `json:"expires_at"`
	Projects  []Project `json:"projects"`
	// DefaultProject is the project requests that name none act in (set
	// with `gpuaas project use`); nil when the caller has none.
	DefaultProject *Project `json:"default_project,omitempty"`
	// Token is the token the caller is, when it is one (docs/tokens.md).
	Token *Token `json:"token,omitempty"`
}

// Project groups allocations and the people who may use them.
type Project struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role,omitempty"` // the caller's role in it
	CreatedAt time.Time `json:"created_at"`
}

// ProjectCreateRequest creates a project owned by the caller.
type ProjectCreateRequest struct {
	Name string `json:"name"`
}

// ProjectListResponse lists the caller's projects.
type ProjectListResponse struct {
	Projects []Project `json:"projects"`
}

// ProjectRef names a project by id or name.
type ProjectRef struct {
	Project string `json:"project"`
}

// Member is one person's role in a project.
type Member struct {
	UserID  string    `json:"user_id"`
	Email   string    `json:"email"`
	Role    string    `json:"role"`
	AddedAt time.Time `json:"added_at"`
	// Kind is MemberUser, or MemberToken for a machine token (listed
	// while it can act: until it is revoked or expires).
	Kind string `json:"kind"`
}

// Mailable reports whether m is a person mail may be sent to: a machine
// token's principal has an address of TokenDomain, which takes no mail.
func (m Member) Mailable() bool { return m.Kind != MemberToken }

// Member kinds.
const (
	MemberUser  = "user"
	MemberToken = "token"
)

// MembersResponse lists a project's members.
type MembersResponse struct {
	Project Project  `json:"project"`
	Members []Member `json:"members"`
}

// AddMemberRequest adds (or changes the role of) a member.
type AddMemberRequest struct {
	Project string `json:"project"`
	Email   string `json:"email"`
	Role    string `json:"role"`
}

// SKU is something that can be rented, with its price.
type SKU struct {
	ID                   string `json:"id"`
	Shape                string `json:"shape"`
	GPUModel             string `json:"gpu_model"`
	GPUCounts            []int  `json:"gpu_counts"`
	PricePerGPUHourMinor int64  `json:"price_per_gpu_hour_minor"`
	Currency             string `json:"currency"`
	Description          string `json:"description,omitempty"`
	// What a slice VM gets per GPU, and the image it boots.
	VCPUsPerGPU     int     `json:"vcpus_per_gpu,omitempty"`
	MemoryMiBPerGPU int     `json:"memory_mib_per_gpu,omitempty"`
	Image           VMImage `json:"image,omitzero"`
	// Availability is what the fleet can serve of the SKU now, as
	// catalog.list reports it.
	Availability *SKUAvailability `json:"availability,omitempty"`
}

// SKUAvailability is a SKU's capacity at one moment.
type SKUAvailability struct {
	// FreeGPUs can be rented now: free slots on ready nodes of the SKU's
	// shape and GPU model (for baremetal, the GPUs of wholly free nodes).
	FreeGPUs int `json:"free_gpus"`
	// Nodes are the ready nodes able to serve the SKU, busy or not; none
	// means no host can serve it, and a request can only wait in line.
	Nodes int `json:"nodes"`
}

// CatalogResponse lists the SKUs on offer.
type CatalogResponse struct {
	SKUs []SKU `json:"skus"`
}

// Node states.
const (
	NodeEnrolled = "enrolled" // registered, waiting for discovery
	NodeReady    = "ready"
	NodeDraining = "draining"
	NodeDown     = "down"
)

// Slot states.
const (
	SlotPending  = "pending"  // discovered, waiting for an operator
	SlotFree     = "free"     // approved and unused
	SlotReserved = "reserved" // held by an allocation
	SlotDisabled = "disabled"
)

// Node is one GPU host.
type Node struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Shape      string `json:"shape"`
	GPUModel   string `json:"gpu_model"`
	State      string `json:"state"`
	SlotsTotal int    `json:"slots_total"`
	SlotsFree  int    `json:"slots_free"`
	// SlotsPending await an operator's approval.
	SlotsPending int `json:"slots_pending"`
	// SlotsQuarantined are kept out of placement (health.go).
	SlotsQuarantined int `json:"slots_quarantined"`
	// TasksOpen are hostd tasks not yet finished on the node (pending,
	// dispatched, accepted or running).
	TasksOpen     int             `json:"tasks_open"`
	LastHeartbeat *time.Time      `json:"last_heartbeat,omitempty"`
	Health        json.RawMessage `json:"health,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
}

// Slot is one GPU of a node with what travels with it.
type Slot struct {
	ID     string `json:"id"`
	NodeID string `json:"node_id"`
	Index  int    `json:"index"`
	GPUPCI string `json:"gpu_pci"`
	// GPUUUID is the GPU's UUID as topology discovery recorded it ("" when
	// the node's inventory does not know it); the driver check compares
	// the guest's with it (DriverCheck).
	GPUUUID      string `json:"gpu_uuid,omitempty"`
	NVMe         string `json:"nvme,omitempty"`
	FabricVF     string `json:"fabric_vf,omitempty"`
	NUMANode     int    `json:"numa_node"`
	MAC          string `json:"mac,omitempty"`
	IP           string `json:"ip,omitempty"`
	State        string `json:"state"`
	AllocationID string `json:"allocation_id,omitempty"`
	// Quarantine is set while the slot is quarantined (health.go).
	Quarantine *SlotQuarantine `json:"quarantine,omitempty"`
}

// NodeListResponse lists nodes.
type NodeListResponse struct {
	Nodes []Node `json:"nodes"`
}

// NodeRef names a node by id or name.
type NodeRef struct {
	Node string `json:"node"`
}

// NodeDetail is a node with its slots.
type NodeDetail struct {
	Node  Node   `json:"node"`
	Slots []Slot `json:"slots"`
	// Volumes are the volumes the node holds (node.get only).
	Volumes []Volume `json:"volumes,omitempty"`
}

// SlotsApproveRequest approves pending slots of a node; no ids means all.
type SlotsApproveRequest struct {
	Node  string   `json:"node"`
	Slots []string `json:"slots,omitempty"`
}

// Allocation states (docs/architecture.md, "Flows": release).
const (
	AllocRequested     = "requested"
	AllocProvisioning  = "provisioning"
	AllocActive        = "active"
	AllocReleasing     = "releasing"
	AllocReleased      = "released"
	AllocFailed        = "failed"
	AllocReleaseFailed = "release_failed"
)

// Allocation is a rented node or slice.
type Allocation struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	// Project is the project's name (alloc.list).
	Project string `json:"project,omitempty"`
	UserID  string `json:"user_id"`
	SKU     string `json:"sku"`
	Shape   string `json:"shape"`
	GPUs    int    `json:"gpus"`
	State   string `json:"state"`
	Version int64  `json:"version"`
	Queued  bool   `json:"queued"`
	// QueuePosition is a queued request's place in its SKU's line (1 =
	// next; alloc.get only).
	QueuePosition int       `json:"queue_position,omitempty"`
	NodeID        string    `json:"node_id,omitempty"`
	Slots         []Slot    `json:"slots"`
	Reason        string    `json:"reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// Timeline is the host-side progress, phase by phase (alloc.get only).
	Timeline []PhaseTiming `json:"timeline,omitempty"`
	// Usage is what it has cost so far (alloc.get, and alloc.release once
	// billing stopped); absent if it never became active.
	Usage *AllocationUsage `json:"usage,omitempty"`
	// Note, on a reply to a request that had nothing left to change (a
	// release of an allocation the platform already failed or released),
	// says what happened instead.
	Note string `json:"note,omitempty"`
	// Policy is its effective idle and duration policy (alloc.get only;
	// absent when neither applies). See idle.go.
	Policy *AllocPolicy `json:"policy,omitempty"`
	// Notices are its latest notices, oldest first: a GPU that failed,
	// idle and duration warnings, budget warnings (alloc.get only; the
	// alloc.notice events it was sent).
	Notices []AllocNotice `json:"notices,omitempty"`
	// Volumes are the volumes it has, by path, with their state
	// (attaching, attached, detaching; alloc.get only).
	Volumes []AllocVolume `json:"volumes,omitempty"`
}

// AllocCreateRequest asks for an allocation. Project defaults to the
// Gpuaas-Project header.
type AllocCreateRequest struct {
	Project string `json:"project,omitempty"`
	SKU     string `json:"sku"`
	GPUs    int    `json:"gpus"`
	Queue   bool   `json:"queue,omitempty"`
	// IdleReleaseAfter overrides the project's idle period ("30m", "off";
	// "" inherits it) and MaxDuration caps the allocation's life ("8h";
	// "" none). See idle.go.
	IdleReleaseAfter string `json:"idle_release_after,omitempty"`
	MaxDuration      string `json:"max_duration,omitempty"`
	// Volumes are mounted in the allocation (volumes.go): the allocation
	// is placed on their node.
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// AllocQuote is the answer of alloc.quote (`gpuaas alloc create
// --dry-run`): what a create with the same request would cost and whether
// it would be placed now, computed without changing anything.
type AllocQuote struct {
	ProjectID string `json:"project_id"`
	SKU       string `json:"sku"`
	Shape     string `json:"shape"`
	GPUs      int    `json:"gpus"`
	// PricePerHourMinor is the SKU's price per GPU-hour times GPUs, in
	// minor units of Currency.
	PricePerHourMinor int64  `json:"price_per_hour_minor"`
	Currency          string `json:"currency"`
	// Fits reports whether placement would succeed now; NodeID is where.
	Fits   bool   `json:"fits"`
	NodeID string `json:"node_id,omitempty"`
	// Queued reports that the request would wait for capacity (--queue and
	// no fit), at QueuePosition (1 = next) in its SKU's line.
	Queued        bool `json:"queued,omitempty"`
	QueuePosition int  `json:"queue_position,omitempty"`
	// BalanceMinor is the project's balance and RunwaySeconds how long it
	// lasts at BurnPerHourMinor, the project's total burn with this
	// allocation (what its placed allocations cost per hour, plus
	// PricePerHourMinor); RunwaySeconds is absent when nothing is charged.
	BalanceMinor     *int64 `json:"balance_minor,omitempty"`
	RunwaySeconds    *int64 `json:"runway_seconds,omitempty"`
	BurnPerHourMinor int64  `json:"burn_per_hour_minor"`
	// InsufficientFunds reports that a create would be refused
	// (insufficient_funds): the balance is under NeededMinor, the cost of
	// MinRunwaySeconds at BurnPerHourMinor.
	InsufficientFunds bool  `json:"insufficient_funds,omitempty"`
	MinRunwaySeconds  int64 `json:"min_runway_seconds"`
	NeededMinor       int64 `json:"needed_minor"`
	// TopupsOff says the platform takes no top-ups (no payment provider):
	// money comes from an administrator's credit.
	TopupsOff bool `json:"topups_off,omitempty"`
	// BudgetExceeded, when set, is why a create would be refused with
	// budget_exceeded (see EndpointBillingBudgetGet).
	BudgetExceeded string `json:"budget_exceeded,omitempty"`
}

// AllocRef names an allocation.
type AllocRef struct {
	ID string `json:"id"`
}

// AllocListRequest filters the caller's allocations.
type AllocListRequest struct {
	Project string `json:"project,omitempty"`
	State   string `json:"state,omitempty"`
	All     bool   `json:"all,omitempty"` // include released and failed
}

// AllocListResponse lists allocations, newest first.
type AllocListResponse struct {
	Allocations []Allocation `json:"allocations"`
}

// AllocReleaseRequest releases an allocation. Force (operators) releases
// from any non-terminal state.
type AllocReleaseRequest struct {
	ID     string `json:"id"`
	Force  bool   `json:"force,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Event is a domain change, published from the outbox.
type Event struct {
	ID        int64           `json:"id"`
	Kind      string          `json:"kind"`
	At        time.Time       `json:"at"`
	ProjectID string          `json:"project_id,omitempty"`
	Subject   string          `json:"subject,omitempty"` // e.g. the allocation id
	Users     []string        `json:"users,omitempty"`   // who it is fanned out to
	Data      json.RawMessage `json:"data,omitempty"`
	// Seq is the event's sequence in the EVENTS stream: clients resume
	// from the last one they saw (events.since).
	Seq uint64 `json:"seq,omitempty"`
	// Prev is the stream sequence of the previous event fanned out to the
	// same user (0: none known), so each user's events form a chain: a
	// client that has not seen Prev missed an event and reads it back
	// (events.since). It differs between the copies of one event.
	Prev uint64 `json:"prev,omitempty"`
	// Corr is the correlation id of the request (or of the host task it
	// queued) that made the change, to find its story in the logs.
	Corr string `json:"corr,omitempty"`
}

// Event kinds.
const (
	EventAllocState = "alloc.state"
	EventProject    = "project.changed"
	EventNode       = "node.changed"
)

// AllocStateChange is the payload of an alloc.state event.
type AllocStateChange struct {
	From       string     `json:"from"`
	To         string     `json:"to"`
	Reason     string     `json:"reason,omitempty"`
	Allocation Allocation `json:"allocation"`
}
