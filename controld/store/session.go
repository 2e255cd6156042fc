package store

import "github.com/jackc/pgx/v5/pgconn"

// sessionLimits bounds what a controld session cut off from Postgres can
// hold on the server (docs/decisions/0010-leases-and-fencing.md): the
// server probes an idle client with TCP keepalives and ends the session
// (and its transaction's locks) about 25 s after the client went silent,
// and a transaction left idle for 30 s (no request may take longer:
// controld.Config.RequestTimeout) is ended whatever the network says (a
// paused process answers keepalives). Transactions that hold a hot lock
// across a round trip set a shorter timeout of their own. Unix sockets ignore the
// keepalive settings.
func sessionLimits(c *pgconn.Config) {
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	for k, v := range map[string]string{
		"tcp_keepalives_idle":                 "10",
		"tcp_keepalives_interval":             "5",
		"tcp_keepalives_count":                "3",
		"idle_in_transaction_session_timeout": "30s",
	} {
		if _, set := c.RuntimeParams[k]; !set {
			c.RuntimeParams[k] = v
		}
	}
}
