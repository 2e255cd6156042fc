package httpfront

import (
	"context"
	"errors"
	"net/http"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Links is how the front redeems one-time links; gateproto.Front implements
// it.
type Links interface {
	GateRedeemLink(ctx context.Context, req gateproto.GateRedeemLinkRequest) (*gateproto.GateRedeemLinkResponse, error)
}

var _ Links = gateproto.Front{}

// redeemLink serves api.LinkPath: it redeems the code (once, for this
// exposure only), sets the front's cookie bound to the login that minted
// it, and goes to the path controld recorded at minting — a path on this
// host, whatever the query says, so the link redirects nowhere else. The
// code travels in the URL only until this answer: no-store, no referrer.
func (s *Server) redeemLink(w http.ResponseWriter, r *http.Request, label string) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet {
		page(w, http.StatusMethodNotAllowed, "Open the link", "Open the link the CLI printed in your browser.")
		return
	}
	code := r.URL.Query().Get("code")
	if code == "" {
		page(w, http.StatusBadRequest, "No code", "Run `gpuaas open URL` for a link.")
		return
	}
	got, err := s.cfg.Links.GateRedeemLink(r.Context(), gateproto.GateRedeemLinkRequest{Host: label, Code: code})
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && (ae.Code == api.CodeNotFound || ae.Code == api.CodeInvalidArgument) {
			page(w, http.StatusNotFound, "This link is not valid", "It was used already, expired, or is for another page. Run `gpuaas open URL` again.")
			return
		}
		s.cfg.Log.Warn("redeem link", "host", label, "err", err)
		page(w, http.StatusBadGateway, "The platform did not answer", "Try again in a moment.")
		return
	}
	exp := s.cfg.Now().Add(s.cfg.CookieTTL)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.signCookie(got.SessionID, got.UserID, label, exp),
		Path: "/", Expires: exp, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, got.Path, http.StatusSeeOther)
}
