package hostproto

import "time"

// Subjects between controld and hostd. controld → hostd requests go to
// gpuaas.host.<node>.*; hostd → controld messages go to
// gpuaas.ctl.host.<node>.*, each signed with the node's enrolled key.
// Only the Msg… declarations (proto.go) build them: senders and receivers
// reach a subject through its message.
const (
	// SubjectEnroll is MsgEnroll's subject.
	SubjectEnroll = "gpuaas.ctl.enroll"
)

// hostCtlSubject is where a node reports to controld: kind is heartbeat,
// progress, result, pull, cas or fault.
func hostCtlSubject(nodeID, kind string) string { return "gpuaas.ctl.host." + nodeID + "." + kind }

// Kinds of node reports.
const (
	HostHeartbeat = "heartbeat"
	HostProgress  = "progress"
	HostResult    = "result"
	HostPull      = "pull"
	// HostCAs asks for the keys of the internal CA that signs gateway
	// tickets (signed like a pull request; answered with SSHCAsResponse).
	HostCAs = "cas"
)

// EnrollRequest registers a node once, with a one-time token.
type EnrollRequest struct {
	Token        string `json:"token"`
	PublicKey    []byte `json:"public_key"` // the node's Ed25519 key
	Hostname     string `json:"hostname"`
	Version      string `json:"version"`
	TerminalAddr string `json:"terminal_addr,omitempty"`
	// TerminalHostKey is the terminal server's host key (authorized_keys
	// format), which sshgate checks when it connects.
	TerminalHostKey string `json:"terminal_host_key,omitempty"`
}

// EnrollResponse tells the node who it is and which keys sign its tasks.
type EnrollResponse struct {
	NodeID            string        `json:"node_id"`
	Name              string        `json:"name"`
	Shape             string        `json:"shape"`
	TaskKeys          [][]byte      `json:"task_keys"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
}
