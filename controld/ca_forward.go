package controld

import (
	"context"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/internal/api"
)

// The SSH CA's endpoints are controld/ca's (ca.Endpoints); what the
// gateway's handlers still on the server use of it is forwarded here.

// HostCertValidity is how long the gateway's host certificate is valid
// (ca.HostCertValidity).
const HostCertValidity = ca.HostCertValidity

// ticketCAKeys is what nodes are told to trust for gateway tickets
// (ca.Service.TicketKeys).
func (s *Server) ticketCAKeys(ctx context.Context) ([]string, error) {
	return s.cas.TicketKeys(ctx, s.pool)
}

// certError is ca.CertError.
func certError(err error) error { return ca.CertError(err) }

// marshalCert is ca.MarshalCert.
func marshalCert(cert *ssh.Certificate) api.SSHCertResponse { return ca.MarshalCert(cert) }
