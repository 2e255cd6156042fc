package ca

import (
	"crypto/rsa"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
)

// MinRSABits is the smallest RSA key controld certifies for a user.
const MinRSABits = 3072

// ParseSubjectKey reads a public key a client wants certified (authorized_keys
// format, comment optional) and checks it against the policy: Ed25519 or
// ECDSA (plain or on a security key), or RSA of at least MinRSABits. A
// certificate is refused: certifying one would let its holder stretch or
// re-scope a certificate someone else issued.
func ParseSubjectKey(line string) (ssh.PublicKey, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "public_key is required").
			WithHint("pass the contents of a .pub file, e.g. ~/.ssh/id_ed25519.pub")
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "public_key is not an SSH public key: %v", err)
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return nil, api.Errorf(api.CodeInvalidArgument, "public_key is a certificate; send the plain public key")
	}
	switch pub.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoSKED25519,
		ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoSKECDSA256:
		return pub, nil
	case ssh.KeyAlgoRSA:
		ck, ok := pub.(ssh.CryptoPublicKey)
		if !ok {
			break
		}
		rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey)
		if !ok {
			break
		}
		if bits := rk.N.BitLen(); bits < MinRSABits {
			return nil, api.Errorf(api.CodeInvalidArgument, "RSA key of %d bits; at least %d are needed", bits, MinRSABits).
				WithHint("use an Ed25519 key: ssh-keygen -t ed25519")
		}
		return pub, nil
	}
	return nil, api.Errorf(api.CodeInvalidArgument, "%s keys are not accepted", pub.Type()).
		WithHint("use an Ed25519 key: ssh-keygen -t ed25519")
}
