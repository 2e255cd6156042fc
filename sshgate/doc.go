// Package sshgate is gpuaas's SSH gateway: `ssh <allocation-id>@gateway`
// reaches the allocation's node, `ssh gpuaas@gateway <command>` runs gpuaas
// commands. It is a wish (charmbracelet/ssh) server and holds no state of
// its own: run as many as you like behind a TCP load balancer.
//
// It is the SSH front of the gateway; what does not need an SSH session —
// CA trust, the gateway credential, authorize + tickets and the node
// dialer, recording, activity and notices — is the core's (gateway/core,
// docs/decisions/0012-gateway-rooms.md).
//
// # Start
//
// Run loads (or makes, 0600) the host key, has controld's host CA certify
// it for the configured principals (gate.host_cert) and serves both the
// certificate and the key, so OpenSSH with the `@cert-authority` line from
// `gpuaas ssh-config` trusts the gateway without a prompt. It reads the CA
// keys (ssh.cas) and re-reads them every RefreshInterval, so a CA
// rotation reaches it without a restart; the host certificate is renewed
// when two thirds of it have passed or its CA was retired. Recordings go
// to the stream controld creates.
//
// # Authentication
//
// Only user certificates of the user CA (see auth.go): no passwords, no
// keyboard-interactive, no plain keys. The identity is bound to the key
// that actually authenticated (the sshcert CVE-2024-45337 guard) and
// re-checked for every session (still valid, CA still trusted).
//
// # Sessions: the middleware chain
//
//	recover (wish/recover) → logging → auth re-check → dispatch
//	                                       ├─ user name is an allocation id → proxy (proxy.go)
//	                                       └─ "gpuaas" or the user's own id → command mode (commands.go)
//
// Channel types other than session and direct-tcpip, subsystems other than
// sftp, and global requests other than remote forwarding (tcpip-forward,
// cancel-tcpip-forward) are refused.
//
// # Proxy
//
// The first channel of a connection asks controld (gate.authorize) whether
// the certificate's user may open the allocation, sending a fresh ed25519
// key made for this connection; controld returns the node's terminal
// address, its terminal host key and a one-minute ticket certifying the
// key. The gateway dials the node with the ticket as the allocation's
// POSIX user, and every channel of the client's connection is carried on
// that one link. The node's host key must be the one controld has for it:
// hostd reports it with its enrollment and heartbeats, signed with the
// node's key, so the gateway never trusts on first use (gateway/core, hostdkeys.go).
//
// A session is replayed on a session channel of the node (env limited to
// TERM, LANG, LC_*, the other names logged; the agent request of ssh -A;
// pty-req with modes and pixel sizes; shell, exec or sftp; window changes;
// signals), and the node's exit status or signal goes back to the client.
// A direct-tcpip channel is opened unchanged on the node, which decides
// where it may go. Remote forwarding (ssh -R) is asked of the node, which
// listens on the allocation's loopback; the forwarded-tcpip channels it
// opens come back to the client for granted forwards only, and agent
// channels only once the client asked for its agent (remote.go). All bytes move through io.Copy
// between flow-controlled SSH channels: a client that does not read stops
// the node within a few windows, whatever the node writes.
//
// Every session and port forward is indexed with controld (session.start,
// session.end with bytes and exit status); a session that cannot be
// indexed is not served.
//
// # Recording
//
// PTY sessions are recorded (gateway/core's record.go): while the session runs, output
// chunks and resizes are appended, framed with their time, to a file (one
// buffered write; the session never waits on JSON or the network;
// MaxRecordingBytes caps the disk used): in the gateway's own spool
// (Config.RecordingDir) under the session id, or else a temporary file
// unlinked at creation. When the session ends the frames are converted to
// asciicast v2 on the fly and streamed into the sealed recordings stream
// (internal/recstore) as the session id's chunks, then the index entry is
// closed with its name and chunk count, and controld seals the recording —
// in the background, so the client is not kept waiting; Run waits for it.
// Once sealed, nobody can replace or delete a recording: only the stream's
// age and size limits retire it.
//
// # Stopping and crashes
//
// When Run's context ends (SIGTERM, SIGINT) the gateway stops listening,
// refuses new sessions, tells every open session "gateway shutting down"
// on its stderr and ends it with exit status 255, closes the connections,
// and gives the recordings' uploads and the index entries ShutdownGrace to
// finish. A gateway that dies instead leaves its sessions running in the
// index and their recordings in the spool; its next Run, before serving,
// uploads those recordings, ends their sessions as interrupted
// (api.SessionInterrupted), and has controld mark the rest of the sessions
// indexed under its Name interrupted too (session.interrupt; gateway/core, index.go).
//
// # Command mode
//
// Commands run on a fresh cobra tree per session (Config.Commands) whose
// streams are the session. They need a bearer token for the certificate's
// user: the user's own token when the client sends it (SendEnv
// GPUAAS_TOKEN) and controld confirms it is that user's; otherwise the
// gateway calls the gateway-only gate.user_token with the user id and the
// certificate the user authenticated with. controld re-verifies the
// certificate against its user CA and opens a delegated session for that
// user: no longer than the certificate nor 15 minutes, audited as issued
// through the gateway, unable to mint certificates or tokens or reach
// ops.* and gate.* endpoints.
package sshgate
