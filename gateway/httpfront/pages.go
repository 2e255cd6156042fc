package httpfront

import (
	"fmt"
	"html"
	"net/http"

	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// page writes a short HTML page saying what happened.
func page(w http.ResponseWriter, status int, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><html><head><meta charset=\"utf-8\"><title>%d %s</title></head>"+
		"<body><h1>%s</h1><p>%s</p><p><small>gpuaas gateway</small></p></body></html>\n",
		status, html.EscapeString(title), html.EscapeString(title), html.EscapeString(body))
}

// verdictPage answers a verdict other than allow: 401 with how to log in,
// 403, 404 or 410.
func verdictPage(w http.ResponseWriter, verdict, reason, label string) {
	switch verdict {
	case gateproto.VerdictLogin:
		page(w, http.StatusUnauthorized, "Log in to open this page",
			reason+". Open it with `gpuaas open URL` (or send your token as Authorization: Bearer).")
	case gateproto.VerdictForbidden:
		page(w, http.StatusForbidden, "Not shared with you", reason+".")
	case gateproto.VerdictGone:
		page(w, http.StatusGone, "This exposure has ended", reason+". See `gpuaas expose list`.")
	case gateproto.VerdictNotFound:
		page(w, http.StatusNotFound, "No such exposure", reason+".")
	default:
		page(w, http.StatusBadGateway, "Unexpected answer", "The platform answered "+verdict+" for "+label+".")
	}
}
