package api

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// A request's reply subject is chosen by whoever publishes it, and NATS
// does not check it. controld therefore answers a request only on the
// inbox of an identity the request proves (docs/decisions/0001-reply-subjects.md):
//
//   - a session token proves its user: the reply must be in
//     InboxPrefix(user id);
//   - a connection that signed in with an nkey (a client that has not
//     logged in, an enrolling node, a gateway) proves its key with
//     HeaderReplyProof, its signature of ReplyProofMessage: the reply must
//     be in InboxPrefix(key);
//   - a node's reports prove their node by their subject, which only that
//     node may publish to: the reply must be in InboxPrefix(node id).
//
// Anything else is dropped unanswered and unexecuted.

// HeaderReplyProof carries a key-named inbox's proof (ReplyProof).
const HeaderReplyProof = "Gpuaas-Reply-Proof"

// ReplyProofMessage is what a key signs to have replies sent to its
// inbox. Only controld ever receives it (nobody else may read the API's
// subjects), so it need not change per request.
func ReplyProofMessage(key string) []byte {
	return []byte("gpuaas reply-inbox v1 " + InboxPrefix(key))
}

// ReplyProof returns the HeaderReplyProof value of kp's connection.
func ReplyProof(kp nkeys.KeyPair) (string, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("reply proof: %w", err)
	}
	sig, err := kp.Sign(ReplyProofMessage(pub))
	if err != nil {
		return "", fmt.Errorf("reply proof: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// CanonicalUserKey reports whether key is an nkey user public key in its
// one canonical spelling: nkeys' base32 decoder skips line breaks, so
// "UAB\rC..." decodes to the key of "UABC...", and a key must name one
// identity wherever it is looked up (registered keys, revocations, inboxes).
func CanonicalUserKey(key string) bool {
	if !nkeys.IsValidPublicUserKey(key) {
		return false
	}
	kp, err := nkeys.FromPublicKey(key)
	if err != nil {
		return false
	}
	canonical, err := kp.PublicKey()
	return err == nil && canonical == key
}

// VerifyReplyProof reports whether proof is key's signature of
// ReplyProofMessage(key).
func VerifyReplyProof(key, proof string) bool {
	if !CanonicalUserKey(key) || proof == "" {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(proof)
	if err != nil {
		return false
	}
	kp, err := nkeys.FromPublicKey(key)
	if err != nil {
		return false
	}
	return kp.Verify(ReplyProofMessage(key), sig) == nil
}

// InboxOwner returns the identity whose inbox reply is in
// (InboxPrefix(id) + "." + at least one more token), or false.
func InboxOwner(reply string) (string, bool) {
	rest, ok := strings.CutPrefix(reply, inboxRoot+".")
	if !ok {
		return "", false
	}
	id, tail, ok := strings.Cut(rest, ".")
	if !ok || !ValidInboxID(id) || tail == "" {
		return "", false
	}
	return id, true
}

// ValidInboxID reports whether id can name an inbox: one subject token
// without wildcards or spaces.
func ValidInboxID(id string) bool {
	return id != "" && !strings.ContainsAny(id, ".*> \t\r\n") && len(id) <= 128
}

// KeyConnOptions are the NATS options of a connection that signs in with
// kp (a client not logged in, an enrolling node, a gateway): kp proves it
// to the server, replies arrive on kp's own inbox. proof goes with its
// requests (WithReplyProof).
func KeyConnOptions(kp nkeys.KeyPair) (opts []nats.Option, proof string, err error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", fmt.Errorf("connection key: %w", err)
	}
	if proof, err = ReplyProof(kp); err != nil {
		return nil, "", err
	}
	return []nats.Option{nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(InboxPrefix(pub))}, proof, nil
}
