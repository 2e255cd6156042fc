package api

// Endpoints of identity in the user API: logging in and out,
// who the caller is, SSH certificates and the trusted CAs. Each is declared
// here once: its name (Subject(name) is its subject; audit rows and logs
// name it so) and its descriptor, with its request and response types,
// access level and kind (endpoint.go, docs/decisions/0013-endpoint-
// descriptors.md).
const (
	EndpointAuthConfig   = "auth.config"
	EndpointAuthExchange = "auth.exchange"
	EndpointAuthLogin    = "auth.login"
	EndpointAuthLogout   = "auth.logout"
	EndpointSSHCert      = "auth.ssh_cert"
	EndpointAuthWhoami   = "auth.whoami"
	EndpointSSHCAs       = "ssh.cas"
)

var (
	// OpAuthConfig is auth.config: asks the server how to log in.
	OpAuthConfig = NewQuery[Empty, AuthConfigResponse](EndpointAuthConfig, Public)
	// OpAuthExchange is auth.exchange: trades an OIDC ID token for a session
	// token.
	OpAuthExchange = NewSecretMutation[ExchangeRequest, LoginResponse](EndpointAuthExchange, Public)
	// OpAuthLogin is auth.login: authenticates with the local provider.
	OpAuthLogin = NewSecretMutation[LoginRequest, LoginResponse](EndpointAuthLogin, Public)
	// OpAuthLogout is auth.logout: revokes the current session token.
	OpAuthLogout = NewMutation[Empty, LogoutResponse](EndpointAuthLogout, LoggedIn)
	// OpSSHCert is auth.ssh_cert: has controld sign the caller's public key
	// (authorized_keys format) as a user certificate that ends no later than
	// the session.
	OpSSHCert = NewMutation[SSHCertRequest, SSHCertResponse](EndpointSSHCert, LoggedIn)
	// OpAuthWhoami is auth.whoami: describes the caller.
	OpAuthWhoami = NewQuery[Empty, WhoamiResponse](EndpointAuthWhoami, LoggedIn)
	// OpSSHCAs is ssh.cas: returns the trusted CA keys and the gateway
	// address.
	OpSSHCAs = NewQuery[Empty, SSHCAsResponse](EndpointSSHCAs, OptionalLogin)
)
