package api

// Endpoints of the gateway protocol: what sshgate (role gateway) asks
// controld, and the login it gets its service token with. Not for users:
// every one but gate.login is GatewayOnly. Each is declared here once: its
// name (Subject(name) is its subject; audit rows and logs name it so) and
// its descriptor, with its request and response types, access level and
// kind (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointGateActivity     = "gate.activity"
	EndpointGateAuthorize    = "gate.authorize"
	EndpointGateCredentials  = "gate.credentials"
	EndpointGateHostCert     = "gate.host_cert"
	EndpointGateLogin        = "gate.login"
	EndpointGateSessions     = "gate.sessions"
	EndpointGateUserToken    = "gate.user_token"
	EndpointGateVolumeEnd    = "gate.volume_end"
	EndpointSessionEnd       = "session.end"
	EndpointSessionInterrupt = "session.interrupt"
	EndpointSessionStart     = "session.start"
)

var (
	// OpGateActivity is gate.activity: reports allocation activity (gateways
	// only).
	OpGateActivity = NewQuery[GateActivityRequest, GateActivityResponse](EndpointGateActivity, GatewayOnly)
	// OpGateAuthorize is gate.authorize: asks whether a user may open an
	// allocation and, if so, for a one-minute ticket for req.TicketKey
	// (gateway principals only).
	OpGateAuthorize = NewQuery[GateAuthorizeRequest, GateAuthorizeResponse](EndpointGateAuthorize, GatewayOnly)
	// OpGateCredentials is gate.credentials: asks for a gateway certificate
	// (gateway only).
	OpGateCredentials = NewQuery[GateCredentialsRequest, GateCredentialsResponse](EndpointGateCredentials, GatewayOnly)
	// OpGateHostCert is gate.host_cert: has the host CA sign the gateway's
	// host key for req.Principals, valid for 30 days (gateway principals
	// only).
	OpGateHostCert = NewQuery[GateHostCertRequest, SSHCertResponse](EndpointGateHostCert, GatewayOnly)
	// OpGateLogin is gate.login: a registered gateway's short-lived session
	// token for a login assertion signed with its key (the one public gate.*
	// endpoint; the token is a secret, never replayed).
	OpGateLogin = NewSecretMutation[GateLoginRequest, LoginResponse](EndpointGateLogin, Public)
	// OpGateSessions is gate.sessions: asks which of req.Sessions have ended
	// (gateway principals only): logged out, disabled, expired or unknown.
	OpGateSessions = NewQuery[GateSessionsRequest, GateSessionsResponse](EndpointGateSessions, GatewayOnly)
	// OpGateUserToken is gate.user_token: exchanges the user certificate a
	// client authenticated to the gateway with for a short-lived, delegated
	// session token acting as that user (gateway principals only).
	OpGateUserToken = NewQuery[GateUserTokenRequest, GateUserTokenResponse](EndpointGateUserToken, GatewayOnly)
	// OpGateVolumeEnd is gate.volume_end: ends the hold gate.authorize put
	// on a volume for an sftp session, once the session's link to the node
	// is closed (gateway principals only; audited as volume.session_end).
	OpGateVolumeEnd = NewQuery[GateVolumeEndRequest, GateVolumeEndResponse](EndpointGateVolumeEnd, GatewayOnly)
	// OpSessionEnd is session.end: records how a terminal session ended
	// (gateway only).
	OpSessionEnd = NewMutation[SessionEndRequest, TerminalSession](EndpointSessionEnd, GatewayOnly)
	// OpSessionInterrupt is session.interrupt: marks the sessions the named
	// gateway left running as interrupted (gateway only), as it starts again
	// after a crash.
	OpSessionInterrupt = NewMutation[SessionInterruptRequest, SessionInterruptResponse](EndpointSessionInterrupt, GatewayOnly)
	// OpSessionStart is session.start: indexes a terminal session as it opens
	// (gateway only).
	OpSessionStart = NewMutation[SessionStartRequest, TerminalSession](EndpointSessionStart, GatewayOnly)
)
