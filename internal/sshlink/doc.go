// Package sshlink carries SSH's connection protocol (RFC 4254: channels,
// flow control, channel and global requests) as plain frames over one
// mutually authenticated TLS 1.3 connection. It replaces a second full SSH
// transport between sshgate and hostd: TLS does the encryption once, the
// server's TLS certificate carries its SSH host key (pinned by the client's
// gossh.HostKeyCallback) and the client authenticates with an AUTH frame
// holding the gateway and ticket certificates, each signed over the TLS
// exporter (channel binding).
//
// Frame: 1-byte type, 4-byte channel id, 4-byte payload length, payload.
// A channel frame carries the recipient's channel id, except OPEN, which
// carries the sender's. Each channel has a 2 MiB receive window, adjusted
// when half of it has been read, so an unread channel never stalls another.
// As with x/crypto/ssh, the incoming channel and request Go channels must be
// serviced: one reader goroutine per link delivers to them.
//
// Requests that want a reply must be answered with Reply, never req.Reply.
package sshlink
