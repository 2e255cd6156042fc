package api

import "fmt"

// ServiceName is the NATS micro service name controld registers.
const ServiceName = "gpuaas"

// SubjectPrefix is the versioned prefix of every API subject:
// gpuaas.api.v1.<noun>.<verb>.
const SubjectPrefix = "gpuaas.api.v1"

// Subject returns the full subject of an endpoint.
func Subject(endpoint string) string { return SubjectPrefix + "." + endpoint }

// EventStreamName is the JetStream stream the outbox relay publishes to.
const EventStreamName = "EVENTS"

// EventSubjectPrefix is the subject space of the EVENTS stream.
const EventSubjectPrefix = "gpuaas.evt"

// EventSubject is the stream subject of an event kind ("alloc.state").
func EventSubject(kind string) string { return EventSubjectPrefix + "." + kind }

// UserEventSubject is where controld fans an event out for one user.
func UserEventSubject(userID, kind string) string {
	return fmt.Sprintf("gpuaas.user.%s.evt.%s", userID, kind)
}

// UserEventWildcard matches every event fanned out to one user.
func UserEventWildcard(userID string) string {
	return fmt.Sprintf("gpuaas.user.%s.evt.>", userID)
}

// UserInboxPrefix is the custom reply-inbox prefix of a user's connections,
// so that NATS permissions can confine each user to their own replies.
func UserInboxPrefix(userID string) string { return InboxPrefix(userID) }

// InboxPrefix is the reply-inbox prefix of a connection whose identity is
// id: a user id, a node id, or the nkey a connection signed in with (hostd
// enrolling, sshgate, a client not yet logged in). The auth callout lets
// each connection subscribe to its own prefix only. The id is a subject
// token of its own, so that NATS permissions can name every inbox at once
// (InboxWildcard): the connection that serves the API may publish there
// and nowhere else.
func InboxPrefix(id string) string { return inboxRoot + "." + id }

// inboxRoot is the first token of every identity's inbox.
const inboxRoot = "_INBOX"

// InboxWildcard matches every identity's inbox (not controld's own).
const InboxWildcard = inboxRoot + ".>"

// ControldInboxPrefix is the reply-inbox prefix of controld's connections:
// outside InboxWildcard, so no request can make controld answer into it.
const ControldInboxPrefix = "_INBOX_controld"

// ControldAPIInboxPrefix is the reply-inbox prefix of controld's API
// connection, outside InboxWildcard too: it asks only JetStream's account
// information there (bus.WatchCluster).
const ControldAPIInboxPrefix = "_INBOX_controld_api"
