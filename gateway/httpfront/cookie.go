package httpfront

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CookieName is the front's login cookie. The __Host- prefix makes
// browsers keep it host-only, Secure and on Path=/ (RFC 6265bis): it goes
// back to the one exposure that set it.
const CookieName = "__Host-gpuaas"

// credential is what a request brings to be decided on.
type credential struct {
	bearer            string
	sessionID, userID string // from a valid front cookie
}

// credentialOf reads a request's bearer, else its front cookie for label
// (a cookie that does not verify is no credential).
func (s *Server) credentialOf(r *http.Request, label string) credential {
	if raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && raw != "" {
		return credential{bearer: strings.TrimSpace(raw)}
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return credential{}
	}
	sid, uid, ok := s.verifyCookie(c.Value, label)
	if !ok {
		return credential{}
	}
	return credential{sessionID: sid, userID: uid}
}

// signCookie binds a login (session and user) to an exposure's label
// until exp.
func (s *Server) signCookie(sessionID, userID, label string, exp time.Time) string {
	payload := strings.Join([]string{sessionID, userID, label, strconv.FormatInt(exp.Unix(), 10)}, "|")
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

func (s *Server) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.cfg.CookieKey)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// verifyCookie checks a cookie's signature, label and expiry.
func (s *Server) verifyCookie(v, label string) (sessionID, userID string, ok bool) {
	p64, sig64, found := strings.Cut(v, ".")
	if !found {
		return "", "", false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(sig64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, s.mac(string(payload))) {
		return "", "", false
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 4 || parts[2] != label {
		return "", "", false
	}
	exp, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || !s.cfg.Now().Before(time.Unix(exp, 0)) {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// dropFrontCookie removes the front's cookie from a request going to the
// renter's server, keeping the others.
func dropFrontCookie(r *http.Request) {
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cookies {
		if c.Name != CookieName {
			r.AddCookie(c)
		}
	}
}
