package busauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// revokeConsumer is the durable consumer, shared by every replica, that
// closes the connections of revoked sessions.
const revokeConsumer = "bus-revocations"

// pruneEvery is how often expired connection rows are deleted.
const pruneEvery = time.Minute

// record remembers a connection the callout let in, so a revocation can
// close it. A session revoked between the decision and the row is caught
// by checking it again once the row is there.
func (s *Service) record(ctx context.Context, req *jwt.AuthorizationRequestClaims, g *grant) {
	var sess, key *string
	if g.sessionID != "" {
		sess = &g.sessionID
	}
	if g.connKey != "" {
		key = &g.connKey
	}
	_, err := s.cfg.Pool.Exec(ctx, `INSERT INTO bus_connections
		(server_id, client_id, kind, principal, session_id, conn_key, source, connected_at, expires_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (server_id, client_id) DO UPDATE SET
		kind = $3, principal = $4, session_id = $5, conn_key = $6, source = $7, connected_at = $8, expires_at = $9`,
		req.Server.ID, int64(req.ClientInformation.ID), g.kind, g.principal, sess, key, g.source, s.now(), g.expires)
	if err != nil {
		s.cfg.Log.Warn("record nats connection", "err", err)
		return
	}
	if g.sessionID == "" {
		return
	}
	live, err := identity.SessionLive(ctx, s.cfg.Pool, g.sessionID, s.now())
	if err == nil && !live {
		s.kick(ctx, req.Server.ID, req.ClientInformation.ID)
	}
}

// SourceOf returns the address a connection that has not logged in came
// from, given the reply subject of its request (its inbox is named after
// its key); "" when unknown.
func SourceOf(ctx context.Context, q store.Querier, reply string) string {
	rest, ok := strings.CutPrefix(reply, "_INBOX_")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, ".")
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
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev api.Event
		if json.Unmarshal(m.Data(), &ev) != nil {
			s.cfg.Log.Error("revocations: undecodable event")
			_ = m.Term()
			return
		}
		if err := s.closeRevoked(ctx, ev); err != nil {
			s.cfg.Log.Warn("close revoked connections", "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return fmt.Errorf("revocations consume: %w", err)
	}
	defer cc.Stop()
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if _, err := s.cfg.Pool.Exec(ctx, `DELETE FROM bus_connections WHERE expires_at < $1`, s.now()); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("prune nats connections", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
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
