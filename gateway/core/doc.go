// Package core is the part of gpuaas's gateway that every front shares
// and that needs no user-facing protocol (docs/decisions/0012-gateway-rooms.md):
//
//   - trust: controld's CA keys (user, host, internal), re-read on
//     rotation (trust.go);
//   - the gateway's own credential towards nodes: its key's one-hour
//     gateway certificate, renewed at half-life (creds.go);
//   - authorize and tickets, and the node dialer: gate.authorize for a
//     user and an allocation, a one-minute ticket for a key made for that
//     link alone, and the link to the node's terminal server with its host
//     key pinned (dial.go, hostdkeys.go); a TCP stream to a port on the
//     allocation's loopback over it (port.go);
//   - recording and the session index: a PTY session's frames on local
//     disk, converted to asciicast v2 when it ends and uploaded into the
//     sealed recordings stream; each session's entry in controld's index;
//     the spool a crash leaves, recovered at the next start (record.go,
//     spool.go, index.go);
//   - activity and notices: which allocations moved data, reported to
//     controld for idle release, and controld's notices handed to the
//     fronts' open sessions (activity.go);
//   - revocation: the fronts' authenticated connections by login, ended
//     when controld announces or confirms their login ended (revoke.go).
//
// Its API is in terms of an allocation, a user (Grant), streams and
// Notifiers; it imports no SSH server library and nothing of wish (a
// layout test in gateway/ checks it). It does use x/crypto/ssh: the link
// to a node carries SSH's connection layer. The SSH front is sshgate; the
// HTTPS front, to come, is gateway/httpfront.
package core
