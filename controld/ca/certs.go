package ca

import (
	"context"
	"errors"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// HostCertValidity is how long the gateway's host certificate is valid;
// sshgate renews it well before.
const HostCertValidity = 30 * 24 * time.Hour

// TicketKeys is what nodes are told to trust for gateway tickets: the
// internal CA's trusted keys, as authorized_keys lines.
func (s *Service) TicketKeys(ctx context.Context, q store.Querier) ([]string, error) {
	a, err := s.Authority(ctx, q, api.CAInternal)
	if err != nil {
		return nil, err
	}
	return a.AuthorizedKeysLines(), nil
}

// CertError turns what sshcert refuses to mint into invalid_argument.
func CertError(err error) error {
	if errors.Is(err, sshcert.ErrInvalidRequest) {
		return api.Errorf(api.CodeInvalidArgument, "%v", err)
	}
	return err
}

// MarshalCert is a certificate as the API answers it: its
// authorized_keys line and when it stops being valid.
func MarshalCert(cert *ssh.Certificate) api.SSHCertResponse {
	return api.SSHCertResponse{
		Certificate: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC(),
	}
}
