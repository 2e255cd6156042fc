package busauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// revokeConsumer is the durable consumer, shared by every replica, that
// closes the connections of revoked sessions.
const revokeConsumer = "bus-revocations"

// pruneEvery is how often expired connection rows are deleted.
const pruneEvery = time.Minute

// connRow is a connection the callout let in, to be recorded.
type connRow struct {
	server string
	client uint64
	g      *grant
	at     time.Time
}

// recordBatch bounds the rows written in one statement.
const recordBatch = 256

// record remembers a connection the callout let in, so a revocation can
// close it. Rows are written in batches by runRecorder, off the path of
// the connection's first requests; a prelogin connection's row is written
// at once (its login looks the source up right after).
func (s *Service) record(ctx context.Context, req *jwt.AuthorizationRequestClaims, g *grant) {
	row := connRow{server: req.Server.ID, client: req.ClientInformation.ID, g: g, at: s.now()}
	if g.kind != KindPreLogin {
		select {
		case s.rows <- row:
			return
		default: // the recorder is behind: write this one ourselves
		}
	}
	s.writeRows(ctx, []connRow{row})
}

// runRecorder writes queued connection rows until ctx ends.
func (s *Service) runRecorder(ctx context.Context) {
	for {
		var batch []connRow
		select {
		case <-ctx.Done():
			return
		case r := <-s.rows:
			batch = append(batch, r)
		}
		// Linger a little: connections come in bursts, and one statement
		// for many is cheaper than one each.
		linger := time.NewTimer(s.cfg.RecordLinger)
	drain:
		for len(batch) < recordBatch {
			select {
			case r := <-s.rows:
				batch = append(batch, r)
			case <-linger.C:
				break drain
			case <-ctx.Done():
				break drain
			}
		}
		linger.Stop()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		s.writeRows(wctx, batch)
		cancel()
	}
}

// writeRows records rows in one statement, then closes those whose
// session ended, or whose key was revoked, between the decision and the
// row (a revocation that found no row to close).
func (s *Service) writeRows(ctx context.Context, rows []connRow) {
	n := len(rows)
	servers, clients, kinds, principals := make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
	sessions, keys, sources := make([]*string, n), make([]*string, n), make([]string, n)
	ats, expires := make([]time.Time, n), make([]time.Time, n)
	var refs []gateproto.GateSession
	var registered []string
	for i, r := range rows {
		servers[i], clients[i], kinds[i], principals[i] = r.server, int64(r.client), r.g.kind, r.g.principal
		sources[i], ats[i], expires[i] = r.g.source, r.at, r.g.expires
		if r.g.sessionID != "" {
			sessions[i] = &r.g.sessionID
			refs = append(refs, gateproto.GateSession{SessionID: r.g.sessionID, UserID: r.g.principal})
		}
		if r.g.connKey != "" {
			keys[i] = &r.g.connKey
		}
		if r.g.kind == KindGateway || r.g.kind == KindOperator {
			registered = append(registered, r.g.principal)
		}
	}
	_, err := s.cfg.Pool.Exec(ctx, `INSERT INTO bus_connections
		(server_id, client_id, kind, principal, session_id, conn_key, source, connected_at, expires_at)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::timestamptz[], $9::timestamptz[])
		ON CONFLICT (server_id, client_id) DO UPDATE SET kind = EXCLUDED.kind, principal = EXCLUDED.principal,
			session_id = EXCLUDED.session_id, conn_key = EXCLUDED.conn_key, source = EXCLUDED.source,
			connected_at = EXCLUDED.connected_at, expires_at = EXCLUDED.expires_at`,
		servers, clients, kinds, principals, sessions, keys, sources, ats, expires)
	if err != nil {
		s.cfg.Log.Warn("record nats connections", "count", n, "err", err)
		return
	}
	ended, err := identity.SessionsEnded(ctx, s.cfg.Pool, refs, s.now())
	if err != nil {
		s.cfg.Log.Warn("check recorded sessions", "err", err)
		return
	}
	if len(ended) > 0 {
		ids := make([]string, len(ended))
		for i, e := range ended {
			ids[i] = e.SessionID
		}
		if err := s.CloseSessions(ctx, ids); err != nil {
			s.cfg.Log.Warn("close ended sessions' connections", "err", err)
		}
	}
	revoked, err := revokedKeys(ctx, s.cfg.Pool, registered)
	if err != nil {
		s.cfg.Log.Warn("check recorded keys", "err", err)
		return
	}
	for _, k := range revoked {
		if err := s.ClosePrincipal(ctx, k); err != nil {
			s.cfg.Log.Warn("close revoked key's connections", "err", err)
		}
	}
}

// SourceOf returns the address a connection that has not logged in came
// from, given the reply subject of its request (its inbox is named after
// its key); "" when unknown.
func SourceOf(ctx context.Context, q store.Querier, reply string) string {
	key, ok := api.InboxOwner(reply)
	if !ok {
		return ""
	}
	var src string
	if err := q.QueryRow(ctx, `SELECT source FROM bus_connections WHERE conn_key = $1 AND kind = $2
		ORDER BY connected_at DESC LIMIT 1`, key, KindPreLogin).Scan(&src); err != nil {
		return ""
	}
	return src
}

// runRegistry closes revoked sessions' connections as their events arrive
// and prunes rows whose authorization has expired.
func (s *Service) runRegistry(ctx context.Context) error {
	js, err := jetstream.New(s.cfg.NATS)
	if err != nil {
		return fmt.Errorf("registry jetstream: %w", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, api.EventStreamName, jetstream.ConsumerConfig{
		Durable:        revokeConsumer,
		AckPolicy:      jetstream.AckExplicitPolicy,
		FilterSubjects: []string{api.EventSubject(api.EventSessionRevoked), api.EventSubject(api.EventBusIdentityRevoked)},
		// Only revocations from now on matter: older sessions' connections
		// were closed when they happened or have expired since.
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fmt.Errorf("revocations consumer: %w", err)
	}
	var lastErr atomic.Pointer[error]
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev api.Event
		if json.Unmarshal(m.Data(), &ev) != nil {
			s.cfg.Log.Error("revocations: undecodable event")
			_ = m.Term()
			return
		}
		if logoutGrace := logoutCloseGrace(ev); logoutGrace > 0 {
			// The connection that asked for the logout waits for its
			// reply, sent as the revocation commits: closing it at once
			// can beat the reply (`gpuaas logout` then failed with
			// "connection closed"). The session is refused everywhere
			// already; its connection closes a moment later. The event
			// is acked after the close, so a restart meanwhile redelivers
			// it.
			go func() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(logoutGrace):
				}
				s.ackAfterClose(ctx, m, ev)
			}()
			return
		}
		s.ackAfterClose(ctx, m, ev)
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { lastErr.Store(&err) }))
	if err != nil {
		return fmt.Errorf("revocations consume: %w", err)
	}
	defer cc.Stop()
	// The consumer stopping by itself (deleted by the server) ends the
	// run: the supervisor creates it again.
	stopped := make(chan error, 1)
	go func() { stopped <- outbox.WaitConsume(ctx, cons, cc, &lastErr) }()
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if _, err := s.cfg.Pool.Exec(ctx, `DELETE FROM bus_connections WHERE expires_at < $1`, s.now()); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("prune nats connections", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-stopped:
			if err == nil {
				return nil
			}
			return fmt.Errorf("revocations: %w", err)
		case <-t.C:
		}
	}
}

// ackAfterClose closes the connections ev revoked and acks m, or has it
// redelivered when that failed.
func (s *Service) ackAfterClose(ctx context.Context, m jetstream.Msg, ev api.Event) {
	if err := s.closeRevoked(ctx, ev); err != nil {
		s.cfg.Log.Warn("close revoked connections", "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	_ = m.Ack()
}

// logoutGrace is how long the connections of a session its user logged
// out of stay open after the revocation: long enough for the logout's
// reply to reach the connection that asked for it.
const logoutGrace = time.Second

// logoutCloseGrace is the pause before closing ev's connections:
// logoutGrace for a logout, none for any other revocation.
func logoutCloseGrace(ev api.Event) time.Duration {
	if ev.Kind != api.EventSessionRevoked {
		return 0
	}
	var rev api.SessionRevoked
	if json.Unmarshal(ev.Data, &rev) != nil || rev.Reason != "logout" {
		return 0
	}
	return logoutGrace
}

// closeRevoked closes the connections an event revoked.
func (s *Service) closeRevoked(ctx context.Context, ev api.Event) error {
	switch ev.Kind {
	case api.EventSessionRevoked:
		var rev api.SessionRevoked
		if err := json.Unmarshal(ev.Data, &rev); err != nil {
			s.cfg.Log.Error("revocations: undecodable session.revoked", "event", ev.ID, "err", err)
			return nil
		}
		return s.CloseSessions(ctx, rev.SessionIDs)
	case api.EventBusIdentityRevoked:
		var rev api.BusIdentityRevokeResponse
		if err := json.Unmarshal(ev.Data, &rev); err != nil {
			s.cfg.Log.Error("revocations: undecodable bus.identity_revoked", "event", ev.ID, "err", err)
			return nil
		}
		for _, id := range rev.Revoked {
			if err := s.ClosePrincipal(ctx, id.PublicKey); err != nil {
				return err
			}
		}
	}
	return nil
}

// CloseSessions closes every NATS connection opened with one of the
// sessions.
func (s *Service) CloseSessions(ctx context.Context, sessionIDs []string) error {
	if len(sessionIDs) == 0 {
		return nil
	}
	return s.closeWhere(ctx, `session_id = ANY($1)`, sessionIDs)
}

// ClosePrincipal closes every connection of a principal (a revoked
// gateway or operator key).
func (s *Service) ClosePrincipal(ctx context.Context, principal string) error {
	return s.closeWhere(ctx, `principal = $1`, principal)
}

func (s *Service) closeWhere(ctx context.Context, where string, arg any) error {
	rows, err := s.cfg.Pool.Query(ctx, `DELETE FROM bus_connections WHERE `+where+` RETURNING server_id, client_id`, arg)
	if err != nil {
		return fmt.Errorf("revoked connections: %w", err)
	}
	type conn struct {
		server string
		id     int64
	}
	var conns []conn
	for rows.Next() {
		var c conn
		if err := rows.Scan(&c.server, &c.id); err != nil {
			rows.Close()
			return fmt.Errorf("revoked connections: %w", err)
		}
		conns = append(conns, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("revoked connections: %w", err)
	}
	for _, c := range conns {
		s.kick(ctx, c.server, uint64(c.id))
	}
	return nil
}

// kickTimeout bounds one KICK request.
const kickTimeout = 2 * time.Second

// kick asks the server holding a connection to close it. A connection
// that is already gone is not an error.
func (s *Service) kick(ctx context.Context, serverID string, clientID uint64) {
	if s.cfg.System == nil {
		return
	}
	body, _ := json.Marshal(map[string]uint64{"cid": clientID})
	kctx, cancel := context.WithTimeout(ctx, kickTimeout)
	defer cancel()
	reply, err := s.cfg.System.RequestWithContext(kctx, "$SYS.REQ.SERVER."+serverID+".KICK", body)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.cfg.Log.Warn("close nats connection", "server", serverID, "cid", clientID, "err", err)
		}
		return
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(reply.Data, &r) == nil && r.Error != nil {
		s.cfg.Log.Debug("close nats connection", "server", serverID, "cid", clientID, "err", r.Error.Description)
		return
	}
	s.cfg.Log.Info("closed nats connection", "server", serverID, "cid", clientID)
}
