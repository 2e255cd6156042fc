package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gpuaas/gpuaas/internal/api"
)

// webTimeout bounds how long --web waits for the browser to come back.
const webTimeout = 5 * time.Minute

// callback is what the browser brought back to the loopback redirect.
type callback struct {
	code string
	err  error
}

// webLogin runs the authorization code flow with PKCE (RFC 7636) and a
// loopback redirect (RFC 8252), and returns the ID token with the nonce
// this login sent, which the token must carry (controld checks it).
// cli/oauth's webapp package sends neither grant_type, redirect_uri nor a
// code verifier to the token endpoint, so this uses golang.org/x/oauth2,
// which does.
func webLogin(ctx context.Context, opts *LoginOptions, hc *http.Client, provider *oidc.Provider, p api.OIDCProvider) (idToken, nonce string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", fmt.Errorf("listen for the browser's redirect: %w", err)
	}
	defer ln.Close() // when the check below fails, no server owns it yet
	ep := provider.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInParams // a public client: no secret
	cfg := oauth2.Config{ClientID: p.ClientID, Endpoint: ep, Scopes: p.Scopes,
		RedirectURL: fmt.Sprintf("http://%s/callback", ln.Addr())}
	state, verifier := rand.Text(), oauth2.GenerateVerifier()
	nonce = rand.Text()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))

	// An IdP that does not know the client or its redirect URI says so on
	// the login page and never redirects: ask for that page first, so the
	// user reads the reason here instead of waiting in vain.
	if err := checkAuthRequest(ctx, hc, authURL, p); err != nil {
		return "", "", err
	}

	results := make(chan callback, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: callbackHandler(state, results)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	w := opts.IO.ErrOut
	fmt.Fprintf(w, "Log in with your identity provider in the browser. If none opens, open this URL:\n  %s\n", authURL)
	if opts.OpenBrowser != nil {
		if err := opts.OpenBrowser(authURL); err != nil {
			fmt.Fprintf(w, "Could not open a browser (%v): open the URL above yourself.\n", err)
		}
	}
	stop := waitNotice(opts, "the browser to come back to "+cfg.RedirectURL, "this login", webTimeout)
	defer stop()
	fmt.Fprintln(w, "If the browser shows an error from the identity provider instead, nothing comes back here:"+
		" press Ctrl-C (docs/oidc.md lists the client settings the IdP needs).")
	wait, cancel := context.WithTimeout(ctx, webTimeout)
	defer cancel()
	var cb callback
	select {
	case cb = <-results:
		stop()
	case <-wait.Done():
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "", &api.Error{Code: api.CodeUnauthenticated, Message: fmt.Sprintf("login failed: the browser did not come back within %s", webTimeout),
			Hint: "run `gpuaas login --web` again, or `gpuaas login` for the device flow"}
	}
	if cb.err != nil {
		return "", "", cb.err
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), cb.code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return "", "", &api.Error{Code: api.CodeUnauthenticated,
				Message: fmt.Sprintf("login failed: the identity provider refused the code: %s %s", re.ErrorCode, re.ErrorDescription)}
		}
		return "", "", idpError("redeem the authorization code", err)
	}
	if raw, _ := tok.Extra("id_token").(string); raw != "" {
		return raw, nonce, nil
	}
	return "", "", errNoIDToken
}

// callbackHandler takes the first request to /callback: a code with the
// state this login sent, or the identity provider's error. A request with
// another state did not come from this login's redirect; it ends the
// login rather than let a forged request log in as someone else.
func callbackHandler(state string, results chan<- callback) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var cb callback
		switch {
		case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
			cb.err = &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: the browser came back with a state this login did not send",
				Hint: "run `gpuaas login --web` again; if it repeats, something else is answering the redirect"}
		case q.Get("error") == "access_denied":
			cb.err = &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: the identity provider denied the request",
				Hint: "run `gpuaas login --web` again and approve the request"}
		case q.Get("error") != "":
			cb.err = &api.Error{Code: api.CodeUnauthenticated,
				Message: strings.TrimSpace(fmt.Sprintf("login failed: the identity provider answered %s %s", q.Get("error"), q.Get("error_description")))}
		case q.Get("code") == "":
			cb.err = &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: the browser came back without a code"}
		default:
			cb.code = q.Get("code")
		}
		select {
		case results <- cb:
		default: // a second request: the first one decided
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		msg := "You are logged in to gpuaas. You may close this page."
		if cb.err != nil {
			msg = "gpuaas login failed: " + cb.err.Error()
		}
		fmt.Fprintf(w, "<!doctype html><title>gpuaas login</title><p>%s</p>\n", html.EscapeString(msg))
	})
	return mux
}

// systemBrowser returns how to show a URL: $BROWSER (a command; "%s"
// stands for the URL, else it is the last argument), else xdg-open or
// open when on PATH, else nil (the URL is only printed).
func systemBrowser(env string) func(string) error {
	var argv []string
	if first, _, _ := strings.Cut(env, ":"); strings.TrimSpace(first) != "" {
		argv = strings.Fields(first)
	} else {
		for _, opener := range []string{"xdg-open", "open"} {
			if path, err := exec.LookPath(opener); err == nil {
				argv = []string{path}
				break
			}
		}
	}
	if argv == nil {
		return nil
	}
	return func(u string) error {
		args := append([]string(nil), argv[1:]...)
		replaced := false
		for i, a := range args {
			if strings.Contains(a, "%s") {
				args[i], replaced = strings.ReplaceAll(a, "%s", u), true
			}
		}
		if !replaced {
			args = append(args, u)
		}
		cmd := exec.Command(argv[0], args...)
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }() // the browser outlives the login
		return nil
	}
}
