package api

import (
	"strings"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"
)

// TokenUserID is the user id a session token names (its JWT subject),
// read without verifying it: controld verifies; a client only needs to
// know on which inbox its replies arrive. A token for machines names its
// own id (MachineTokenID). "" when token is neither.
func TokenUserID(token string) string {
	if token == "" {
		return ""
	}
	if id, ok := MachineTokenID(token); ok {
		return id
	}
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil {
		return ""
	}
	if claims.Subject == "" || strings.ContainsAny(claims.Subject, ".*> \t\r\n") {
		return ""
	}
	return claims.Subject
}

// SessionConnOptions are the NATS options of a user's connection: the
// session token is its credential and replies arrive on the user's own
// inbox, the only one it may read. ok is false when token is not a
// session token.
func SessionConnOptions(token string) (opts []nats.Option, ok bool) {
	uid := TokenUserID(token)
	if uid == "" {
		return nil, false
	}
	return []nats.Option{nats.Token(token), nats.CustomInboxPrefix(UserInboxPrefix(uid))}, true
}
