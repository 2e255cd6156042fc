package api

// Endpoints of terminal sessions as their users see them. Each is declared
// here once: its name (Subject(name) is its subject; audit rows and logs
// name it so) and its descriptor, with its request and response types,
// access level and kind (endpoint.go, docs/decisions/0013-endpoint-
// descriptors.md).
const (
	EndpointSessionGet       = "session.get"
	EndpointSessionList      = "session.list"
	EndpointSessionRecording = "session.recording"
)

var (
	// OpSessionGet is session.get: returns one terminal session.
	OpSessionGet = NewQuery[SessionRef, TerminalSession](EndpointSessionGet, LoggedIn)
	// OpSessionList is session.list: lists the caller's terminal sessions
	// (operators: everyone's), newest first.
	OpSessionList = NewQuery[SessionListRequest, SessionListResponse](EndpointSessionList, LoggedIn)
	// OpSessionRecording is session.recording: copies a session's recording to
	// w, chunk by chunk.
	OpSessionRecording = NewQuery[RecordingRequest, RecordingChunk](EndpointSessionRecording, LoggedIn)
)
