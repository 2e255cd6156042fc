package api

// Endpoints of terminal sessions as their users see them.
// Declared once here; see endpoint.go.
var (
	// OpSessionGet is session.get: returns one terminal session.
	OpSessionGet = NewQuery[SessionRef, TerminalSession](EndpointSessionGet, LoggedIn)
	// OpSessionList is session.list: lists the caller's terminal sessions (operators: everyone's), newest first.
	OpSessionList = NewQuery[SessionListRequest, SessionListResponse](EndpointSessionList, LoggedIn)
	// OpSessionRecording is session.recording: copies a session's recording to w, chunk by chunk.
	OpSessionRecording = NewQuery[RecordingRequest, RecordingChunk](EndpointSessionRecording, LoggedIn)
)
