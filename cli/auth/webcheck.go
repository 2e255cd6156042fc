package auth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// checkAuthRequest asks the identity provider for the authorization URL
// the browser is about to open, without following its redirects. An IdP
// that does not know the client id or does not accept the loopback
// redirect URI answers that request with an error page (Dex: 404 "Invalid
// client_id", 400 "Unregistered redirect_uri"; Keycloak: 400 "Client not
// found", "Invalid parameter: redirect_uri") and never redirects back, so
// the login would only wait out its time. Such an answer is returned as
// the login's error, with the page's text. Anything else (a login page, a
// redirect, a network error the browser may not have) lets the login go
// on: the browser may reach what this machine cannot, and an IdP that
// demands a real browser must not be mistaken for a refusal.
func checkAuthRequest(ctx context.Context, hc *http.Client, authURL string, p api.OIDCProvider) error {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return fmt.Errorf("authorization URL: %w", err)
	}
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound:
	default:
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	said := pageText(string(body))
	if said == "" {
		said = resp.Status
	}
	return &api.Error{Code: api.CodeUnauthenticated,
		Message: fmt.Sprintf("login failed: identity provider %s refused the login request of client %s before asking who you are (HTTP %d): %s",
			p.Issuer, p.ClientID, resp.StatusCode, said),
		Hint: fmt.Sprintf("the IdP must know %s as a public client (no secret) that may redirect to http://127.0.0.1 on any port "+
			"(RFC 8252); docs/oidc.md has the settings for Dex, Keycloak and others", p.ClientID)}
}

var (
	htmlSkipped = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>`)
	htmlTag     = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlEntity  = strings.NewReplacer("&quot;", `"`, "&#34;", `"`, "&#39;", "'", "&amp;", "&", "&lt;", "<", "&gt;", ">", "&nbsp;", " ")
)

// maxPageText bounds how much of an error page goes into a message.
const maxPageText = 300

// pageText is the readable text of an error page: tags, scripts and styles
// dropped, whitespace collapsed, at most maxPageText bytes.
func pageText(page string) string {
	page = htmlSkipped.ReplaceAllString(page, " ")
	page = htmlTag.ReplaceAllString(page, " ")
	page = strings.Join(strings.Fields(htmlEntity.Replace(page)), " ")
	if len(page) > maxPageText {
		cut := maxPageText
		for cut > 0 && !isRuneStart(page[cut]) {
			cut--
		}
		page = page[:cut] + "…"
	}
	return page
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
