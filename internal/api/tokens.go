package api

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Tokens for machines (docs/tokens.md): a secret a pipeline or tool uses
// as GPUAAS_TOKEN instead of a login. It acts as a principal of its own,
// with one role (member or viewer) in one project, until it expires or is
// revoked.

// TokenSecretPrefix starts every token secret, so that secret scanners
// and people recognise one: gpuaas_tk_<12 id characters>_<52 secret
// characters>.
const TokenSecretPrefix = "gpuaas_tk_"

// TokenIDPrefix starts the id of a token, which is also the user id its
// requests act as (audit rows name it as their actor).
const TokenIDPrefix = "tk-"

// Token states.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// MaxTokenTTL bounds a token's life: a token that leaks stops working
// within a year whatever happens.
const MaxTokenTTL = 365 * 24 * time.Hour

// MinTokenTTL is the shortest life a token may be given.
const MinTokenTTL = time.Minute

// EventToken tells the token's creator a token was created or revoked;
// the Data is the Token.
const EventToken = "token"

// Token is a token as listed: never its secret.
type Token struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	ProjectID      string     `json:"project_id"`
	Project        string     `json:"project"`
	Role           string     `json:"role"`
	State          string     `json:"state"`
	CreatedBy      string     `json:"created_by"`
	CreatedByEmail string     `json:"created_by_email"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	RevokedAt      *time.Time `json:"revoked_at,omitempty"`
}

// TokenCreateRequest asks for a token in Project (else the request's
// project) with Role, living TTL ("30d", "12h").
type TokenCreateRequest struct {
	Name    string `json:"name"`
	Project string `json:"project,omitempty"`
	Role    string `json:"role"`
	TTL     string `json:"ttl"`
}

// TokenCreateResponse carries the token's secret: shown once, stored
// only as a hash.
type TokenCreateResponse struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret"`
}

// TokenListRequest lists the tokens of Project (else the request's
// project); revoked and expired ones only with All.
type TokenListRequest struct {
	Project string `json:"project,omitempty"`
	All     bool   `json:"all,omitempty"`
}

// TokenListResponse is token.list's answer, oldest first.
type TokenListResponse struct {
	Tokens []Token `json:"tokens"`
}

// TokenRevokeRequest names a token by id, or by name in Project (else the
// request's project).
type TokenRevokeRequest struct {
	Token   string `json:"token"`
	Project string `json:"project,omitempty"`
}

var tokenNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckTokenName checks a token's name: 1–63 lower-case letters, digits,
// dots, dashes and underscores, starting with a letter or digit.
func CheckTokenName(name string) error {
	if !tokenNameRE.MatchString(name) {
		return Errorf(CodeInvalidArgument, "%q is not a valid token name", name).
			WithHint("use 1–63 lower-case letters, digits, '.', '-' and '_', starting with a letter or digit")
	}
	return nil
}

// ParseTokenTTL reads a token's life: a Go duration ("12h", "90m") or a
// number of days ("30d"), within [MinTokenTTL, MaxTokenTTL].
func ParseTokenTTL(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, badTTL(s, "not a number of days")
		}
		n = max(-1, min(n, int(MaxTokenTTL/(24*time.Hour))+1)) // no overflow; still out of range
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, badTTL(s, "not a duration")
		}
	}
	switch {
	case d <= 0:
		return 0, badTTL(s, "a token must live for some time")
	case d < MinTokenTTL:
		return 0, badTTL(s, fmt.Sprintf("shorter than the minimum %s", MinTokenTTL))
	case d > MaxTokenTTL:
		return 0, badTTL(s, "longer than the maximum 365d")
	}
	return d, nil
}

func badTTL(s, why string) error {
	return Errorf(CodeInvalidArgument, "ttl %q: %s", s, why).
		WithHint("give --ttl as days (30d) or a duration (12h), from 1m to 365d")
}

// MachineTokenID returns the id of the token a secret names (its
// principal's user id), read without checking it: controld checks. ok is
// false when secret does not have a token's form.
func MachineTokenID(secret string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(secret, TokenSecretPrefix)
	if !ok {
		return "", false
	}
	idPart, key, ok := strings.Cut(rest, "_")
	if !ok || len(idPart) != 12 || len(key) == 0 || !isTokenAlphabet(idPart) || !isTokenAlphabet(key) {
		return "", false
	}
	return TokenIDPrefix + idPart, true
}

// isTokenAlphabet reports whether s is made of the id alphabet
// (internal/ids: lower-case base32 without i, l, o, u).
func isTokenAlphabet(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", r) {
			return false
		}
	}
	return true
}

// ProviderToken is the identity provider of a token's principal: a users
// row nobody can log in as, whose id is the token's.
const ProviderToken = "token"

// TokenDomain is the email domain of tokens' principals: tk-…@token.gpuaas.
const TokenDomain = "token.gpuaas"
