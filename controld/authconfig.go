package controld

import "context"

// authConfig tells clients how to log in: whether passwords work and
// which identity provider's tokens auth.exchange takes. Nothing in it is
// secret (the OIDC client is public), so anyone may ask.
func (s *Server) authConfig(context.Context, *call) (any, error) {
	return s.identity.LoginMethods(), nil
}
