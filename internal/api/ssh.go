package api

import "time"

// SSH endpoints (issue: sshgate).
const (
	// EndpointSSHCert signs the caller's SSH public key as a user
	// certificate (principal = user id, KeyId = email).
	EndpointSSHCert = "auth.ssh_cert"
	// EndpointSSHCAs returns the CA public keys clients and servers trust.
	EndpointSSHCAs = "ssh.cas"
	// EndpointGateAuthorize is sshgate asking whether a user may open an
	// allocation, and for a ticket to the node (gateway principals only).
	EndpointGateAuthorize = "gate.authorize"
	// EndpointGateHostCert signs the gateway's host key (gateway only).
	EndpointGateHostCert = "gate.host_cert"
	// EndpointSessionStart and EndpointSessionEnd index terminal
	// recordings (gateway only); list and get are for users.
	EndpointSessionStart = "session.start"
	EndpointSessionEnd   = "session.end"
	EndpointSessionList  = "session.list"
	EndpointSessionGet   = "session.get"
	// EndpointCARotate and EndpointCARetire rotate a CA (admins).
	EndpointCARotate = "ops.ca_rotate"
	EndpointCARetire = "ops.ca_retire"
	// EndpointServiceToken issues a long-lived token for a service
	// principal such as sshgate (admins).
	EndpointServiceToken = "ops.service_token"
)

// RoleGateway is the platform role of sshgate's service principal.
const RoleGateway = "gateway"

// CA names.
const (
	CAUser     = "user"     // signs user certificates
	CAHost     = "host"     // signs the gateway's host certificate
	CAInternal = "internal" // signs gateway → hostd tickets
)

// SSHCertRequest asks for a user certificate for a public key.
type SSHCertRequest struct {
	PublicKey string `json:"public_key"` // authorized_keys format
}

// SSHCertResponse carries the certificate.
type SSHCertResponse struct {
	Certificate string    `json:"certificate"` // authorized_keys format, "ssh-ed25519-cert-v01@openssh.com ..."
	ValidBefore time.Time `json:"valid_before"`
}

// SSHCAsResponse lists trusted CA keys, in authorized_keys format, the
// active key first. During a rotation each CA lists old and new keys.
type SSHCAsResponse struct {
	User     []string `json:"user"`
	Host     []string `json:"host"`
	Internal []string `json:"internal,omitempty"` // gateway and hostd only
	// Gateway is where users ssh to ("host:port"), when controld knows it.
	Gateway string `json:"gateway,omitempty"`
}

// GateAuthorizeRequest asks whether UserID may open AllocationID, and for
// a ticket for TicketKey (a fresh key the gateway just generated).
type GateAuthorizeRequest struct {
	AllocationID string `json:"allocation_id"`
	UserID       string `json:"user_id"`
	TicketKey    string `json:"ticket_key"` // authorized_keys format
}

// GateAuthorizeResponse says where to go and with what.
type GateAuthorizeResponse struct {
	AllocationID string    `json:"allocation_id"`
	NodeID       string    `json:"node_id"`
	Shape        string    `json:"shape"`
	PosixUser    string    `json:"posix_user"`
	TerminalAddr string    `json:"terminal_addr"`
	Ticket       string    `json:"ticket"` // authorized_keys format certificate
	ValidBefore  time.Time `json:"valid_before"`
}

// GateHostCertRequest asks for a host certificate for the gateway.
type GateHostCertRequest struct {
	PublicKey  string   `json:"public_key"`
	Principals []string `json:"principals"`
}

// TerminalSession is one recorded SSH session.
type TerminalSession struct {
	ID           string     `json:"id"`
	UserID       string     `json:"user_id"`
	AllocationID string     `json:"allocation_id"`
	Kind         string     `json:"kind"` // shell, exec, sftp, forward
	Command      string     `json:"command,omitempty"`
	StartedAt    time.Time  `json:"started_at"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	Bytes        int64      `json:"bytes"`
	ExitStatus   *int       `json:"exit_status,omitempty"`
	// Recording names the asciicast object in the recordings bucket;
	// empty for sessions without a PTY.
	Recording string `json:"recording,omitempty"`
}

// SessionListRequest filters sessions.
type SessionListRequest struct {
	AllocationID string `json:"allocation_id,omitempty"`
}

// SessionListResponse lists sessions, newest first.
type SessionListResponse struct {
	Sessions []TerminalSession `json:"sessions"`
}

// RecordingsBucket is the JetStream object store bucket of asciicast
// recordings.
const RecordingsBucket = "terminal-recordings"

// CARotateRequest starts (adds a new active key) or finishes (retires a
// key) a rotation.
type CARotateRequest struct {
	CA    string `json:"ca"`
	KeyID string `json:"key_id,omitempty"` // for retire: the fingerprint of the key to drop
}

// ServiceTokenRequest asks for a token for a service principal.
type ServiceTokenRequest struct {
	Name string        `json:"name"` // e.g. "sshgate"
	Role string        `json:"role"` // RoleGateway
	TTL  time.Duration `json:"ttl"`
}
