package gateproto

import "time"

// Gateway credentials: hostd's terminal server lets in only connections
// that first authenticate with a gateway certificate (internal CA, see
// sshcert.SignGateway), then with a ticket. sshgate gets its gateway
// certificate from controld for its own key — the Ed25519 key of its
// registered NATS identity (kind gateway), the one it signs in and logs in
// with — so a stolen gateway token alone cannot have a key of its own
// certified.

// GateCredentialsRequest asks for a gateway certificate for PublicKey.
type GateCredentialsRequest struct {
	PublicKey string `json:"public_key"` // authorized_keys format
}

// GateCredentialsResponse carries the gateway certificate.
type GateCredentialsResponse struct {
	Name        string    `json:"name"`        // the key's registered name
	Certificate string    `json:"certificate"` // authorized_keys format
	ValidBefore time.Time `json:"valid_before"`
}
