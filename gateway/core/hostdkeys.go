package core

import (
	"fmt"
	"net"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// HostdKeyCallback checks that the server answering at a node's terminal
// address is that node's terminal server. The address comes from
// controld, but the network between the gateway and the node is not
// trusted: without this check, whoever answers there would be handed the
// user's session.
//
// The expected key comes from controld with the authorization
// (GateAuthorizeResponse.TerminalHostKey): hostd reports its terminal host
// key in its enrollment and heartbeats, which are signed with the node's
// enrolled key, so the gateway needs no trust of its own — never trust on
// first use. Only when controld has no key for the node does a host
// certificate from the internal CA naming the node id do instead
// (sshcert.VerifyHost); anything else is refused.
func HostdKeyCallback(auth *gateproto.GateAuthorizeResponse, internalCA []gossh.PublicKey, now func() time.Time) gossh.HostKeyCallback {
	return func(addr string, _ net.Addr, key gossh.PublicKey) error {
		if auth.TerminalHostKey != "" {
			want, _, _, _, err := gossh.ParseAuthorizedKey([]byte(auth.TerminalHostKey))
			if err != nil {
				return fmt.Errorf("%w: node %s: controld's key for it does not parse: %v", ErrHostdKey, auth.NodeID, err)
			}
			got := key
			if cert, ok := key.(*gossh.Certificate); ok {
				got = cert.Key // a certificate of the right key adds nothing, takes nothing away
			}
			if string(got.Marshal()) != string(want.Marshal()) {
				return fmt.Errorf("%w: node %s at %s presented %s; controld knows %s", ErrHostdKey, auth.NodeID, addr,
					gossh.FingerprintSHA256(key), gossh.FingerprintSHA256(want))
			}
			return nil
		}
		if _, ok := key.(*gossh.Certificate); ok {
			if err := sshcert.VerifyHost(internalCA, auth.NodeID, key, now()); err != nil {
				return fmt.Errorf("%w: node %s at %s: %v", ErrHostdKey, auth.NodeID, addr, err)
			}
			return nil
		}
		return fmt.Errorf("%w: node %s at %s: controld has no host key for it and it presented a plain %s key",
			ErrHostdKey, auth.NodeID, addr, strings.TrimPrefix(key.Type(), "ssh-"))
	}
}
