package api

import "time"

// RoleGateway is the platform role of sshgate's service principal.
const RoleGateway = "gateway"

// ProviderService is the identity provider of service principals: users
// with no password who cannot log in. A gateway's principal gets its
// short-lived tokens from gate.login, signed with its registered key.
const ProviderService = "service"

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
	// Bundle is the host CA keys and the gateway address, signed by
	// controld's server key (see internal/trustbundle): what a CLI pins and
	// checks later answers against. User, Host and Gateway above are not
	// signed; a CLI uses the bundle's.
	Bundle *TrustBundle `json:"bundle,omitempty"`
}

// TrustBundle is a statement controld signs for clients to pin
// (internal/trustbundle reads and writes it).
type TrustBundle struct {
	// Statement is the signed JSON document, base64 (standard encoding).
	Statement string `json:"statement"`
	// Signature is the Ed25519 signature over the statement, base64.
	Signature string `json:"signature"`
}

// Kinds of terminal sessions.
const (
	SessionShell   = "shell"
	SessionExec    = "exec"
	SessionSFTP    = "sftp"
	SessionForward = "forward"
)

// States of a terminal session.
const (
	// SessionRunning: the gateway serves it.
	SessionRunning = "running"
	// SessionEnded: it ended and the gateway closed its entry (a session
	// the gateway ended as it shut down gracefully is ended too).
	SessionEnded = "ended"
	// SessionInterrupted: its gateway stopped without ending it (a crash)
	// and found it on its next start; what was recorded is kept.
	SessionInterrupted = "interrupted"
)

// TerminalSession is one recorded SSH session.
type TerminalSession struct {
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	// AllocationID is the allocation the session reached; empty for a
	// volume's sftp session, which names VolumeID instead.
	AllocationID string `json:"allocation_id"`
	// VolumeID is the volume of an sftp session to a volume
	// (`sftp <volume-id>@gateway`, docs/volumes.md).
	VolumeID   string     `json:"volume_id,omitempty"`
	Kind       string     `json:"kind"` // shell, exec, sftp, forward
	Command    string     `json:"command,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	Bytes      int64      `json:"bytes"`
	ExitStatus *int       `json:"exit_status,omitempty"`
	// State is SessionRunning, SessionEnded or SessionInterrupted.
	State string `json:"state"`
	// Recording names the asciicast object in the recordings bucket;
	// empty for sessions without a PTY.
	Recording string `json:"recording,omitempty"`
	// Gateway names the gateway instance that served the session.
	Gateway string `json:"gateway,omitempty"`
}

// SessionRef names one session.
type SessionRef struct {
	ID string `json:"id"`
}

// SessionListRequest filters sessions.
type SessionListRequest struct {
	AllocationID string `json:"allocation_id,omitempty"`
	VolumeID     string `json:"volume_id,omitempty"`
}

// SessionListResponse lists sessions, newest first.
type SessionListResponse struct {
	Sessions []TerminalSession `json:"sessions"`
}

// RecordingsBucket is the JetStream object store bucket that held asciicast
// recordings before internal/recstore's sealed stream (still read for
// recordings made then):
// recordings.
const RecordingsBucket = "terminal-recordings"

// CARotateRequest starts (adds a new active key) or finishes (retires a
// key) a rotation.
//
// ops.ca_rotate with neither Stage nor KeyID adds a key and signs with it
// at once (the old key stays trusted). With Stage it adds a key that is
// trusted but does not sign yet, so clients can learn it first (the host
// CA: users' known_hosts); a later ops.ca_rotate with KeyID makes that
// staged key the signing key.
type CARotateRequest struct {
	CA    string `json:"ca"`
	KeyID string `json:"key_id,omitempty"` // retire: the key to drop; rotate: the staged key to activate
	Stage bool   `json:"stage,omitempty"`  // rotate: add a trusted key that does not sign yet
}

// CAKey is one key of a CA.
type CAKey struct {
	CA          string     `json:"ca"`
	ID          string     `json:"id"`         // SHA256 fingerprint
	PublicKey   string     `json:"public_key"` // authorized_keys format
	Active      bool       `json:"active"`     // the key that signs
	CreatedAt   time.Time  `json:"created_at"`
	ActivatedAt *time.Time `json:"activated_at,omitempty"`
	RetiredAt   *time.Time `json:"retired_at,omitempty"`
}

// CAListRequest filters ops.ca_list.
type CAListRequest struct {
	CA      string `json:"ca,omitempty"`      // one CA; empty means all three
	Retired bool   `json:"retired,omitempty"` // include retired keys
}

// CAListResponse lists CA keys by CA, the active key first, then the other
// trusted keys newest first, then retired ones.
type CAListResponse struct {
	Keys []CAKey `json:"keys"`
}
