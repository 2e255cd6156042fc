package volumesapi_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/controld/volumes/volumesapi"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("volumesapi")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// served is a database with a user who owns an unfunded project, a node
// with room for volumes, and volumes' endpoints over it. told are the
// refusals the endpoints handed to Deps.FundsRefusal.
type served struct {
	pool          *pgxpool.Pool
	user, project string
	node          api.Node
	endpointtest.Harness
	told []string
}

func serve(t *testing.T) *served {
	t.Helper()
	ctx := context.Background()
	pool := storetest.Open(t, pgTemplate, 4)
	s := &served{pool: pool, user: ids.New(ids.User), project: ids.New(ids.Project)}
	storetest.User(t, pool, s.user, "vol@example.test", t0)
	storetest.OwnedProject(t, pool, s.project, "proj", s.user, t0)
	var err error
	if s.node, err = node.Register(ctx, pool, sim.BaremetalHost("bm-1", "H100"), t0); err != nil {
		t.Fatal(err)
	}
	probe, _ := json.Marshal(map[string]any{"volume_free_bytes": int64(4) << 40})
	if err := node.SetHealth(ctx, pool, s.node.ID, probe, "", "", t0); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return t0 }
	s.Harness = endpointtest.Serve(pool, now, volumesapi.Endpoints(volumesapi.Deps{DB: pool, Now: now,
		Rules: func() alloc.Rules { return alloc.Rules{MinRunway: 10 * time.Minute} },
		FundsRefusal: func(action string) endpoint.Refusal {
			return func(_ context.Context, r *endpoint.Request, err error) {
				s.told = append(s.told, action+" "+r.IdempotencyKey+" "+string(api.CodeOf(err)))
			}
		},
		Audited: func(ctx context.Context, r *endpoint.Request, fn func(context.Context, pgx.Tx, *audit.Entry) error) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				var e audit.Entry
				if err := fn(ctx, tx, &e); err != nil {
					return err
				}
				return audit.Write(ctx, tx, audit.Meta{At: t0, ActorID: r.Principal.UserID}, e)
			})
		}}))
	return s
}

func (s *served) as(key string) *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: s.user, Role: api.RoleUser}, Project: s.project,
		IdempotencyKey: key}
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, s.pool, sql, args...)
}

// written counts the rows a request may leave behind.
func (s *served) written(t *testing.T) int {
	t.Helper()
	return s.count(t, `SELECT (SELECT count(*) FROM volumes) + (SELECT count(*) FROM audit_logs) +
		(SELECT count(*) FROM outbox_events) + (SELECT count(*) FROM idempotency_keys) + (SELECT count(*) FROM node_tasks)`)
}

// TestPriceSetEndpoint: a volume price in another currency than the
// platform's is invalid_argument and writes nothing; in the platform's,
// the price changes with an audit row naming the one before and a
// volume.price event.
func TestPriceSetEndpoint(t *testing.T) {
	t.Parallel()
	s := serve(t)
	ctx := context.Background()
	set := s.Find(t, api.EndpointAdminVolumePriceSet)
	admin := endpointtest.As(s.user, api.RoleAdmin, "")
	before := s.written(t)
	if _, err := endpointtest.Mutate[api.VolumePrice](ctx, s.Run, set, admin,
		api.VolumePriceSetRequest{Currency: "EUR", PricePerGiBMonthMinor: 12}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("eur: got %v; want invalid_argument", err)
	}
	if after := s.written(t); after != before {
		t.Errorf("the refused price wrote %d rows", after-before)
	}
	p, err := endpointtest.Mutate[api.VolumePrice](ctx, s.Run, set, admin, api.VolumePriceSetRequest{PricePerGiBMonthMinor: 12})
	if err != nil || p.PricePerGiBMonthMinor != 12 || p.PreviousMinor != 10 || !p.Changed {
		t.Fatalf("usd: got %+v, %v; want 12, previously 10, changed", p, err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = 'usd'
		AND (detail->>'previous_minor')::int = 10`, api.EndpointAdminVolumePriceSet); n != 1 {
		t.Errorf("%d audit rows of the change naming the previous price; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1`, api.EventVolumePrice); n != 1 {
		t.Errorf("%d volume.price events; want 1", n)
	}
}

// TestCreateFundsRefusal: an unfunded project's volume is refused
// insufficient_funds, and the refusal is handed, with the request's
// Idempotency-Key, to the audit of volume.create_refused; nothing else is
// written. The quote of the same volume says the same and writes nothing.
func TestCreateFundsRefusal(t *testing.T) {
	t.Parallel()
	s := serve(t)
	ctx := context.Background()
	req := api.VolumeCreateRequest{Name: "data", Size: "1000G", Node: "bm-1"}
	before := s.written(t)
	_, err := endpointtest.Mutate[api.Volume](ctx, s.Run, s.Find(t, api.EndpointVolumeCreate), s.as("k-create"), req)
	if api.CodeOf(err) != api.CodeInsufficientFunds {
		t.Fatalf("create: got %v; want insufficient_funds", err)
	}
	if want := "volume.create_refused k-create insufficient_funds"; len(s.told) != 1 || s.told[0] != want {
		t.Errorf("refusals told %q; want %q", s.told, want)
	}
	_, err = endpointtest.Read[api.VolumeQuote](ctx, s.Find(t, api.EndpointVolumeQuote), s.as(""), req)
	if api.CodeOf(err) != api.CodeInsufficientFunds || !strings.Contains(err.Error(), "at $0.14/h") {
		t.Errorf("quote: got %v; want insufficient_funds at the volume's $0.14/h", err)
	}
	if after := s.written(t); after != before {
		t.Errorf("the refused create and quote wrote %d rows", after-before)
	}
	if len(s.told) != 1 {
		t.Errorf("the quote told a refusal: %q", s.told)
	}
}

// TestGateVolumeEndEndsItsOwnHold: gate.volume_end refuses a malformed
// volume id before any transaction; ending a hold the ticket key does
// not have is audited as released false, in no project, with no event;
// ending the key's own hold makes the volume ready, audited in its
// project, with its event.
func TestGateVolumeEndEndsItsOwnHold(t *testing.T) {
	t.Parallel()
	s := serve(t)
	ctx := context.Background()
	end := s.Find(t, gateproto.EndpointGateVolumeEnd)
	gw := endpointtest.As("gw", api.RoleGateway, "")
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	if _, err := endpointtest.Read[gateproto.GateVolumeEndResponse](ctx, end, gw,
		gateproto.GateVolumeEndRequest{VolumeID: "a-123", TicketKey: key}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("not a volume id: got %v; want invalid_argument", err)
	}
	var v api.Volume
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if v, _, err = volumes.Create(ctx, tx, volumes.CreateArgs{ProjectID: s.project, Name: "data", SizeBytes: 1 << 30,
			Node: "bm-1", ActorID: s.user}, t0); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE volumes SET state = 'ready', task_id = NULL WHERE id = $1`, v.ID); err != nil {
			return err
		}
		_, _, err = volumes.OpenSession(ctx, tx, v.ID, s.user, "SHA256:other", t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs`); n != 0 {
		t.Fatalf("%d audit rows before the ends", n)
	}
	events := s.count(t, `SELECT count(*) FROM outbox_events`)
	got, err := endpointtest.Read[gateproto.GateVolumeEndResponse](ctx, end, gw, gateproto.GateVolumeEndRequest{VolumeID: v.ID, TicketKey: key})
	if err != nil || got.Released {
		t.Fatalf("another key's hold: got %+v, %v; want not released", got, err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'volume.session_end' AND target_id = $1
		AND project_id IS NULL AND detail->>'released' = 'false'`, v.ID); n != 1 {
		t.Errorf("%d unreleased session_end rows in no project; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events`); n != events {
		t.Errorf("%d events from an end that released nothing", n-events)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE volumes SET session_key = $2 WHERE id = $1`, v.ID, sshFingerprint(t, key)); err != nil {
		t.Fatal(err)
	}
	got, err = endpointtest.Read[gateproto.GateVolumeEndResponse](ctx, end, gw, gateproto.GateVolumeEndRequest{VolumeID: v.ID, TicketKey: key})
	if err != nil || !got.Released {
		t.Fatalf("its own hold: got %+v, %v; want released", got, err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'volume.session_end' AND target_id = $1
		AND project_id = $2 AND detail->>'released' = 'true'`, v.ID, s.project); n != 1 {
		t.Errorf("%d released session_end rows in the project; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events`); n != events+1 {
		t.Errorf("%d events from the release; want 1", n-events)
	}
	if n := s.count(t, `SELECT count(*) FROM volumes WHERE id = $1 AND state = 'ready' AND session_key IS NULL`, v.ID); n != 1 {
		t.Error("the volume is not ready again")
	}
}

// sshFingerprint is the SHA256 fingerprint of an authorized_keys line, as
// the gateway's ticket key is recorded.
func sshFingerprint(t *testing.T, line string) string {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(k)
}
