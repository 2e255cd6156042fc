// Package sshwire is the SSH plumbing that sshgate, hostd's terminal
// server (hostd/term) and the sim guests (hostd/sim) share: the wire
// forms of session requests and channel payloads (RFC 4254), the one
// table of the signals SSH can name, the flow-controlled two-way copy
// between streams that pass EOF on, and the loopback-only direct-tcpip
// policy of a node or a guest.
//
// It holds no policy of its own beyond that last one: which requests are
// allowed, and what a refusal tells the client, stay with each server.
package sshwire
