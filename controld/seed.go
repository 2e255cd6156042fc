package controld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Seed describes what a fresh installation (or `gpuaas dev`) starts with.
// Seeding is idempotent: what exists already is left alone.
type Seed struct {
	Catalog []api.SKU
	// Admin is created when no user with its email exists. Password is
	// then required.
	AdminEmail    string
	AdminPassword string
	// Project is created (owned by the admin) when missing.
	Project string
	// Nodes are registered when no node of that name exists; with
	// ApproveSlots their slots are approved at once (dev only: real nodes
	// wait for an operator).
	Nodes        []node.Spec
	ApproveSlots bool
	// InitialCreditMinor, when positive, credits Project once (an audited
	// adjustment by the admin; later seeds find it booked and add nothing).
	InitialCreditMinor int64
}

// SeedResult reports what Seed created.
type SeedResult struct {
	AdminCreated bool
	Admin        api.User
	Project      api.Project
}

// ApplySeed applies sd in one transaction.
func (s *Server) ApplySeed(ctx context.Context, sd Seed) (SeedResult, error) {
	var res SeedResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := catalog.Seed(ctx, tx, sd.Catalog); err != nil {
			return err
		}
		if sd.AdminEmail != "" {
			u, err := identity.UserByEmail(ctx, tx, sd.AdminEmail)
			if errors.Is(err, api.ErrNotFound) {
				u, err = s.identity.CreateLocalUser(ctx, tx, identity.NewUser{Email: sd.AdminEmail, Name: "Administrator",
					Role: api.RoleAdmin, Password: sd.AdminPassword})
				res.AdminCreated = err == nil
			}
			if err != nil {
				return fmt.Errorf("seed admin: %w", err)
			}
			res.Admin = u
		}
		if sd.Project != "" && res.Admin.ID != "" {
			p, err := project.Resolve(ctx, tx, sd.Project)
			if errors.Is(err, api.ErrNotFound) {
				p, err = project.Create(ctx, tx, sd.Project, res.Admin.ID, s.now())
			}
			if err != nil {
				return fmt.Errorf("seed project: %w", err)
			}
			res.Project = p
			if sd.InitialCreditMinor > 0 {
				if err := s.seedCredit(ctx, tx, p, res.Admin.ID, sd.InitialCreditMinor); err != nil {
					return err
				}
			}
		}
		for _, spec := range sd.Nodes {
			if _, err := node.Get(ctx, tx, spec.Name); err == nil {
				continue
			}
			n, err := node.Register(ctx, tx, spec, s.now())
			if err != nil {
				return fmt.Errorf("seed node %s: %w", spec.Name, err)
			}
			if sd.ApproveSlots {
				if _, err := node.ApproveSlots(ctx, tx, n.ID, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return res, err
}

// IssueEnrollToken makes a one-time enrollment token on behalf of actorID,
// as `gpuaas node enroll` does (used by `gpuaas dev` for its sim hosts).
func (s *Server) IssueEnrollToken(ctx context.Context, req api.EnrollTokenRequest, actorID string) (api.EnrollTokenResponse, error) {
	var out api.EnrollTokenResponse
	body, err := s.mut.Run(ctx, mutate.Request{Endpoint: api.EndpointNodeEnroll, ActorID: actorID,
		Key: api.NewIdempotencyKey(), Fingerprint: []byte(req.Name + "\n" + req.Shape), NoReplay: true},
		func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			return node.CreateEnrollToken(ctx, tx, req, actorID, s.now())
		})
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(body, &out)
}

// Nodes lists every node (used by `gpuaas dev` to wait for its hosts).
func (s *Server) Nodes(ctx context.Context) ([]api.Node, error) { return node.List(ctx, s.pool) }

// seedCredit books a project's initial credit once, with its audit row.
func (s *Server) seedCredit(ctx context.Context, tx pgx.Tx, p api.Project, adminID string, amount int64) error {
	e, inserted, err := billing.Append(ctx, tx, billing.Entry{ProjectID: p.ID, Kind: billing.KindAdjustment,
		Reference: "seed:initial-credit:" + p.ID, AmountMinor: amount, Memo: "initial credit (seed)",
		ActorID: adminID, CreatedAt: s.now()})
	if err != nil || !inserted {
		return err
	}
	return audit.Write(ctx, tx, audit.Meta{At: s.now(), ActorID: adminID}, audit.Entry{Action: "billing.credit",
		TargetType: "project", TargetID: p.ID, ProjectID: p.ID,
		Detail: map[string]any{"ledger_entry": e.ID, "amount_minor": amount, "reason": "seed"}})
}
