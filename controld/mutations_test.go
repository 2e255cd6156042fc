package controld_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stripe/stripe-go/v76/webhook"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testidp"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// effects counts the rows a mutation may leave behind.
type effects struct{ audit, outbox, keys, allocations int }

func countEffects(t *testing.T, env *controldtest.Env) effects {
	t.Helper()
	return effects{
		audit:       count(t, env, `SELECT count(*) FROM audit_logs`),
		outbox:      count(t, env, `SELECT count(*) FROM outbox_events`),
		keys:        count(t, env, `SELECT count(*) FROM idempotency_keys`),
		allocations: count(t, env, `SELECT count(*) FROM allocations`),
	}
}

// eventsOf are the mutations whose success does not emit exactly one
// event, with how many they do emit and why. Every other mutation leaves
// exactly one audit row, one event and one idempotency record.
var eventsOf = map[string]struct {
	n   int
	why string
}{
	gateproto.EndpointGateLogin: {0, "a gateway's own service session concerns no user: it is audited, nobody is told"},
	api.EndpointBillingTopup:    {0, "a checkout session changes no balance: the credit, when Stripe reports it paid, is the event"},
	api.EndpointOutboxRetry:     {0, "a retry re-queues an existing event row: that event, once published, is the news"},
	api.EndpointOutboxDrop:      {0, "a drop gives up on an existing event row, which stays (dropped): nobody is told"},
}

// refusalsAudited are the mutations whose refusals are audited too, in a
// write of their own: failed logins are what an audit trail is for.
var refusalsAudited = map[string]bool{api.EndpointAuthLogin: true, api.EndpointAuthExchange: true}

// mutationEnv is a controld with every optional part a mutation may need:
// Stripe (stripe-mock), an OIDC provider, and billing ticks far apart, so
// nothing but the requests of the test writes rows while it counts them.
func mutationEnv(t *testing.T) (*controldtest.Env, *testidp.IdP) {
	t.Helper()
	idp := testidp.New(t, testidp.Options{})
	env := controldtest.Start(t, controldtest.Options{HTTPAddr: "127.0.0.1:0",
		Stripe: payments.Settings{APIBase: testutil.StripeMock(t), SecretKey: "sk_test_controld",
			WebhookSecret: testWebhookSecret, SuccessURL: "http://127.0.0.1/done", CancelURL: "http://127.0.0.1/cancelled"},
		OIDC:    identity.OIDCConfig{Issuer: idp.URL, ClientID: testidp.DefaultClientID},
		Billing: controld.BillingConfig{Window: time.Hour}, Registry: testRegistry(t)})
	return env, idp
}

// mutations is the API's mutating endpoints, as the server registers them.
func mutations(env *controldtest.Env) map[string]controld.EndpointInfo {
	out := map[string]controld.EndpointInfo{}
	for _, ep := range env.Server.Endpoints() {
		if ep.Mutates {
			out[ep.Name] = ep
		}
	}
	return out
}

// checkEffects fails unless a call to endpoint left exactly what it may:
// on success one audit row carrying key, its events and one idempotency
// record (extra: events beyond those); on failure nothing, but the audit
// row of a refusal that is audited.
func checkEffects(t *testing.T, env *controldtest.Env, endpoint, key string, err error, before, after effects, extra int) {
	t.Helper()
	want := before
	want.allocations = after.allocations // the caller checks allocations
	switch {
	case err != nil && refusalsAudited[endpoint]:
		want.audit++
	case err == nil:
		want.audit++
		want.outbox += 1 + extra
		if e, ok := eventsOf[endpoint]; ok {
			want.outbox += e.n - 1
		}
		want.keys++
		if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE idempotency_key = $1`, key); n != 1 {
			t.Errorf("audit rows carrying key %s: got %d; want 1", key, n)
		}
	}
	if after != want {
		t.Fatalf("rows after: got %+v; want %+v", after, want)
	}
}

// waitVerificationRecorded waits until the verifier recorded the queued
// verification of the image named, checks that it wrote one audit row of
// its own and one event, and returns the rows counted then, less those.
func waitVerificationRecorded(t *testing.T, env *controldtest.Env, image string, after effects) effects {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for count(t, env, `SELECT count(*) FROM images WHERE name = $1 AND verify_requested_at IS NOT NULL`, image) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the verification of %s was not recorded", image)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The record may land before the request's rows were counted, or
	// after: count again once it is there, and take its rows away.
	now := countEffects(t, env)
	if own := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = $1 AND coalesce(idempotency_key, '') = ''
		AND detail->>'outcome' = 'recorded'`, api.EndpointImageVerify); own != 1 || now.keys != after.keys {
		t.Fatalf("the verifier's record: %d audit rows of its own, rows %+v (%+v when the request returned); want 1 and no key",
			own, now, after)
	}
	now.audit--
	now.outbox--
	return now
}

// TestEveryMutationWritesOneAuditRowAndOneEvent runs every mutating
// endpoint the server registers, once successfully and in ways that fail,
// and checks the rows each call leaves. A new mutation fails this test
// until it has a successful step here.
func TestEveryMutationWritesOneAuditRowAndOneEvent(t *testing.T) {
	t.Parallel()
	env, idp := mutationEnv(t)
	ctx := t.Context()
	// A node whose slots still wait for an operator.
	pending, err := node.Register(ctx, env.Server.Pool(), controldtest.SliceNode("pending-1", "H200"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	const bobPassword = "another good password"
	admin := env.Client(env.AdminToken)
	bob := env.Client(bobToken)
	anon := env.AnonClient()
	var allocID, inviteCode, terminalID, topupID, tokenID, webhookID, deliveryID string
	var jobID string
	var appAllocID, workloadID string
	dave, _ := env.AddUser(t, "dave@example.test", api.RoleUser) // a user with a live session
	gateway, gatewayKey := env.Gateway(t, "gw-1")
	// The gateway logs in (gate.login) on its first call: before counting.
	if _, err := gateproto.GateSessions(ctx, gateway, gateproto.GateSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	userCA, err := admin.CAList(ctx, api.CAListRequest{CA: api.CAUser})
	if err != nil || len(userCA.Keys) != 1 {
		t.Fatalf("user CA keys: %+v, %v; want one", userCA, err)
	}
	_, operatorKey := newNKey(t)
	_, operatorToken := env.AddUser(t, "olga@example.test", api.RoleOperator)
	operator := env.Client(operatorToken)

	steps := []struct {
		name     string
		c        *api.Client
		endpoint string
		req      any   // a func() any is called when the step runs
		want     error // nil: succeeds
		// setup runs before the rows are counted.
		setup func(t *testing.T)
		// got reads a successful response.
		got func(t *testing.T, resp json.RawMessage)
	}{
		{name: "project.create", c: admin, endpoint: api.EndpointProjectCreate, req: api.ProjectCreateRequest{Name: "second"}},
		{name: "project.create duplicate name", c: admin, endpoint: api.EndpointProjectCreate, req: api.ProjectCreateRequest{Name: "second"}, want: api.ErrConflict},
		{name: "project.create bad name", c: admin, endpoint: api.EndpointProjectCreate, req: api.ProjectCreateRequest{Name: "X"}, want: api.ErrInvalidArgument},
		{name: "project.add_member", c: admin, endpoint: api.EndpointProjectAddMem, req: api.AddMemberRequest{Project: controldtest.ProjectName, Email: "bob@example.test", Role: api.ProjectMember}},
		{name: "project.add_member unknown email", c: admin, endpoint: api.EndpointProjectAddMem, req: api.AddMemberRequest{Project: controldtest.ProjectName, Email: "ghost@example.test", Role: api.ProjectMember}, want: api.ErrNotFound},
		{name: "project.add_member by a member", c: bob, endpoint: api.EndpointProjectAddMem, req: api.AddMemberRequest{Project: controldtest.ProjectName, Email: "bob@example.test", Role: api.ProjectOwner}, want: api.ErrForbidden},
		{name: "project.use", c: bob, endpoint: api.EndpointProjectUse, req: api.ProjectUseRequest{Project: controldtest.ProjectName}},
		{name: "project.use not a member", c: bob, endpoint: api.EndpointProjectUse, req: api.ProjectUseRequest{Project: "second"}, want: api.ErrNotFound},
		{name: "project.use no project", c: bob, endpoint: api.EndpointProjectUse, req: api.ProjectUseRequest{}, want: api.ErrInvalidArgument},
		{name: "token.create", c: admin, endpoint: api.EndpointTokenCreate, req: api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "30d"},
			got: func(t *testing.T, resp json.RawMessage) { tokenID = decoded[api.TokenCreateResponse](t, resp).Token.ID }},
		{name: "token.create ttl 0", c: admin, endpoint: api.EndpointTokenCreate, req: api.TokenCreateRequest{Name: "ci2", Role: api.ProjectViewer, TTL: "0d"}, want: api.ErrInvalidArgument},
		{name: "token.create by a member", c: bob, endpoint: api.EndpointTokenCreate, req: api.TokenCreateRequest{Name: "ci3", Role: api.ProjectViewer, TTL: "1d"}, want: api.ErrForbidden},
		{name: "token.revoke", c: admin, endpoint: api.EndpointTokenRevoke, req: api.TokenRevokeRequest{Token: "ci"}},
		{name: "token.revoke again", c: admin, endpoint: api.EndpointTokenRevoke, req: func() any { return api.TokenRevokeRequest{Token: tokenID} }, want: api.ErrConflict},
		{name: "project.set_policy", c: admin, endpoint: api.EndpointProjectPolicy, req: api.ProjectPolicyRequest{Project: controldtest.ProjectName, IdleReleaseAfter: "2h"}},
		{name: "project.set_policy too short", c: admin, endpoint: api.EndpointProjectPolicy, req: api.ProjectPolicyRequest{Project: controldtest.ProjectName, IdleReleaseAfter: "1s"}, want: api.ErrInvalidArgument},
		{name: "project.set_policy by a member", c: bob, endpoint: api.EndpointProjectPolicy, req: api.ProjectPolicyRequest{Project: controldtest.ProjectName, IdleReleaseAfter: "2h"}, want: api.ErrForbidden},
		{name: "node.slots_approve", c: admin, endpoint: api.EndpointSlotsApprove, req: api.SlotsApproveRequest{Node: pending.Name}},
		{name: "node.slots_approve unknown node", c: admin, endpoint: api.EndpointSlotsApprove, req: api.SlotsApproveRequest{Node: "ghost"}, want: api.ErrNotFound},
		{name: "node.slots_approve by a user", c: bob, endpoint: api.EndpointSlotsApprove, req: api.SlotsApproveRequest{Node: pending.Name}, want: api.ErrForbidden},
		{name: "node.drain", c: admin, endpoint: api.EndpointNodeDrain, req: api.NodeRef{Node: pending.Name}},
		{name: "node.drain again", c: admin, endpoint: api.EndpointNodeDrain, req: api.NodeRef{Node: pending.Name}, want: api.ErrConflict},
		{name: "node.quarantine", c: operator, endpoint: api.EndpointNodeQuarantine, req: api.NodeQuarantineRequest{Node: pending.Name, Slot: new(int), Reason: "ecc errors"}},
		{name: "node.quarantine again", c: admin, endpoint: api.EndpointNodeQuarantine, req: api.NodeQuarantineRequest{Node: pending.Name, Slot: new(int), Reason: "ecc errors"}, want: api.ErrConflict},
		{name: "node.quarantine no reason", c: admin, endpoint: api.EndpointNodeQuarantine, req: api.NodeQuarantineRequest{Node: pending.Name, Slot: new(int)}, want: api.ErrInvalidArgument},
		{name: "node.quarantine by a user", c: bob, endpoint: api.EndpointNodeQuarantine, req: api.NodeQuarantineRequest{Node: pending.Name, Slot: new(int), Reason: "x"}, want: api.ErrForbidden},
		{name: "node.clear", c: operator, endpoint: api.EndpointNodeClear, req: api.NodeClearRequest{Node: pending.Name, Slot: new(int)}},
		{name: "node.clear again", c: admin, endpoint: api.EndpointNodeClear, req: api.NodeClearRequest{Node: pending.Name}, want: api.ErrConflict},
		{name: "node.clear by a user", c: bob, endpoint: api.EndpointNodeClear, req: api.NodeClearRequest{Node: pending.Name}, want: api.ErrForbidden},
		{name: "node.enroll", c: admin, endpoint: api.EndpointNodeEnroll, req: api.EnrollTokenRequest{Name: "enrolled-1"}},
		{name: "node.enroll bad name", c: admin, endpoint: api.EndpointNodeEnroll, req: api.EnrollTokenRequest{Name: "Not A Name"}, want: api.ErrInvalidArgument},
		{name: "node.enroll by a user", c: bob, endpoint: api.EndpointNodeEnroll, req: api.EnrollTokenRequest{Name: "enrolled-2"}, want: api.ErrForbidden},
		{name: "alloc.create", c: bob, endpoint: api.EndpointAllocCreate, req: api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2},
			got: func(t *testing.T, resp json.RawMessage) { allocID = decoded[api.Allocation](t, resp).ID }},
		{name: "alloc.create no capacity", c: bob, endpoint: api.EndpointAllocCreate, req: api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1}, want: api.ErrNoCapacity},
		{name: "alloc.create unknown field", c: bob, endpoint: api.EndpointAllocCreate, req: map[string]any{"sku": "h200-slice", "gpus": 1, "gpu": 2}, want: api.ErrInvalidArgument},
		{name: "volume.create", c: bob, endpoint: api.EndpointVolumeCreate, req: api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "data", Size: "1G", Node: "sim-h100-1"}},
		{name: "volume.create name in use", c: bob, endpoint: api.EndpointVolumeCreate, req: api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "data", Size: "1G", Node: "sim-h100-1"}, want: api.ErrConflict},
		{name: "volume.create bad size", c: bob, endpoint: api.EndpointVolumeCreate, req: api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "other", Size: "1.5X"}, want: api.ErrInvalidArgument},
		{name: "volume.create by a stranger", c: operator, endpoint: api.EndpointVolumeCreate, req: api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "other", Size: "1G"}, want: api.ErrForbidden},
		{name: "volume.resize while creating", c: bob, endpoint: api.EndpointVolumeResize, req: api.VolumeResizeRequest{Project: controldtest.ProjectName, Volume: "data", Size: "2G"}, want: api.ErrConflict},
		{name: "volume.resize", c: bob, endpoint: api.EndpointVolumeResize, req: api.VolumeResizeRequest{Project: controldtest.ProjectName, Volume: "data", Size: "2G"},
			setup: func(t *testing.T) {
				settleVolume(t, env, "data", api.TaskVolumeCreate, hostproto.VolumeTaskResult{SizeBytes: 1 << 30})
			}},
		{name: "volume.rm while resizing", c: bob, endpoint: api.EndpointVolumeRemove, req: api.VolumeRef{Project: controldtest.ProjectName, Volume: "data"}, want: api.ErrConflict},
		{name: "volume.rm", c: bob, endpoint: api.EndpointVolumeRemove, req: api.VolumeRef{Project: controldtest.ProjectName, Volume: "data"},
			setup: func(t *testing.T) {
				settleVolume(t, env, "data", api.TaskVolumeResize, hostproto.VolumeTaskResult{SizeBytes: 2 << 30})
			}},
		{name: "volume.rm unknown", c: bob, endpoint: api.EndpointVolumeRemove, req: api.VolumeRef{Project: controldtest.ProjectName, Volume: "ghost"}, want: api.ErrNotFound},
		{name: "session.start", c: gateway, endpoint: gateproto.EndpointSessionStart,
			req: func() any {
				return gateproto.SessionStartRequest{UserID: env.Admin.ID, AllocationID: allocID, Kind: "shell"}
			},
			got: func(t *testing.T, resp json.RawMessage) { terminalID = decoded[api.TerminalSession](t, resp).ID }},
		{name: "session.start unknown kind", c: gateway, endpoint: gateproto.EndpointSessionStart,
			req: func() any {
				return gateproto.SessionStartRequest{UserID: env.Admin.ID, AllocationID: allocID, Kind: "telnet"}
			}, want: api.ErrInvalidArgument},
		{name: "session.start by a user", c: bob, endpoint: gateproto.EndpointSessionStart,
			req: func() any {
				return gateproto.SessionStartRequest{UserID: env.Admin.ID, AllocationID: allocID, Kind: "shell"}
			}, want: api.ErrForbidden},
		{name: "session.end", c: gateway, endpoint: gateproto.EndpointSessionEnd, req: func() any { return gateproto.SessionEndRequest{ID: terminalID, Bytes: 42} }},
		{name: "session.interrupt", c: gateway, endpoint: gateproto.EndpointSessionInterrupt, req: gateproto.SessionInterruptRequest{Gateway: "gw-1"}},
		{name: "session.interrupt no gateway", c: gateway, endpoint: gateproto.EndpointSessionInterrupt, req: gateproto.SessionInterruptRequest{}, want: api.ErrInvalidArgument},
		{name: "session.interrupt by a user", c: bob, endpoint: gateproto.EndpointSessionInterrupt, req: gateproto.SessionInterruptRequest{Gateway: "gw-1"}, want: api.ErrForbidden},
		{name: "session.end negative bytes", c: gateway, endpoint: gateproto.EndpointSessionEnd, req: func() any { return gateproto.SessionEndRequest{ID: terminalID, Bytes: -1} }, want: api.ErrInvalidArgument},
		{name: "job.create", c: bob, endpoint: api.EndpointJobCreate, req: func() any {
			// No hostd in this test provisions it: the allocation is made active by hand.
			if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, allocID); err != nil {
				t.Fatal(err)
			}
			return api.JobCreateRequest{AllocationID: allocID, Run: "exit 7"}
		}, got: func(t *testing.T, resp json.RawMessage) { jobID = decoded[api.Job](t, resp).ID }},
		{name: "job.create no run", c: bob, endpoint: api.EndpointJobCreate, req: func() any { return api.JobCreateRequest{AllocationID: allocID} }, want: api.ErrInvalidArgument},
		{name: "job.cancel", c: bob, endpoint: api.EndpointJobCancel, req: func() any { return api.JobRef{ID: jobID} }},
		{name: "job.cancel again", c: bob, endpoint: api.EndpointJobCancel, req: func() any { return api.JobRef{ID: jobID} }, want: api.ErrConflict},
		{name: "expose.create", c: bob, endpoint: api.EndpointExposeCreate,
			req: func() any {
				return api.ExposeCreateRequest{Allocation: allocID, Port: 8888, Share: api.ShareMe, TTL: "2h", Name: "nb"}
			}},
		{name: "expose.create port taken", c: bob, endpoint: api.EndpointExposeCreate,
			req: func() any { return api.ExposeCreateRequest{Allocation: allocID, Port: 8888} }, want: api.ErrConflict},
		{name: "expose.create privileged port", c: bob, endpoint: api.EndpointExposeCreate,
			req: func() any { return api.ExposeCreateRequest{Allocation: allocID, Port: 80} }, want: api.ErrInvalidArgument},
		{name: "expose.create unknown share", c: bob, endpoint: api.EndpointExposeCreate,
			req: func() any { return api.ExposeCreateRequest{Allocation: allocID, Port: 8889, Share: "world"} }, want: api.ErrInvalidArgument},
		{name: "expose.create ttl 0", c: bob, endpoint: api.EndpointExposeCreate,
			req: func() any { return api.ExposeCreateRequest{Allocation: allocID, Port: 8889, TTL: "0s"} }, want: api.ErrInvalidArgument},
		{name: "expose.create by an operator", c: operator, endpoint: api.EndpointExposeCreate,
			req: func() any { return api.ExposeCreateRequest{Allocation: allocID, Port: 8889} }, want: api.ErrForbidden},
		{name: "expose.rm by an operator", c: operator, endpoint: api.EndpointExposeRemove,
			req: api.ExposeRemoveRequest{Exposure: "nb", Project: controldtest.ProjectName}, want: api.ErrForbidden},
		{name: "expose.rm", c: bob, endpoint: api.EndpointExposeRemove, req: api.ExposeRemoveRequest{Exposure: "nb", Project: controldtest.ProjectName}},
		{name: "expose.rm again", c: bob, endpoint: api.EndpointExposeRemove, req: api.ExposeRemoveRequest{Exposure: "nb", Project: controldtest.ProjectName}, want: api.ErrNotFound},
		{name: "secret.set", c: bob, endpoint: api.EndpointSecretSet, req: api.SecretSetRequest{Project: controldtest.ProjectName, Name: "hf-token", Value: []byte("v")}},
		{name: "secret.set too long", c: bob, endpoint: api.EndpointSecretSet, req: api.SecretSetRequest{Project: controldtest.ProjectName, Name: "big", Value: make([]byte, api.MaxSecretBytes+1)}, want: api.ErrInvalidArgument},
		{name: "secret.set bad name", c: bob, endpoint: api.EndpointSecretSet, req: api.SecretSetRequest{Project: controldtest.ProjectName, Name: "HF_TOKEN", Value: []byte("v")}, want: api.ErrInvalidArgument},
		{name: "secret.rm", c: bob, endpoint: api.EndpointSecretRemove, req: api.SecretRemoveRequest{Project: controldtest.ProjectName, Name: "hf-token"}},
		{name: "secret.rm again", c: bob, endpoint: api.EndpointSecretRemove, req: api.SecretRemoveRequest{Project: controldtest.ProjectName, Name: "hf-token"}, want: api.ErrNotFound},
		// Hot attach (controld/volumes/volumesapi endpoints_attach.go): a volume into the running
		// slice, on its node, whose health says its slices take volumes.
		{name: "volume.attach", c: bob, endpoint: api.EndpointVolumeAttach,
			req: func() any {
				return api.VolumeAttachRequest{Project: controldtest.ProjectName, Volume: "hot", Allocation: allocID}
			},
			setup: func(t *testing.T) {
				var nodeID string
				if err := env.Server.Pool().QueryRow(ctx, `SELECT node_id FROM allocations WHERE id = $1`, allocID).Scan(&nodeID); err != nil {
					t.Fatal(err)
				}
				if err := node.SetHealth(ctx, env.Server.Pool(), nodeID, json.RawMessage(`{"slice_volumes":true,"volume_free_bytes":107374182400}`), "", "", time.Now()); err != nil {
					t.Fatal(err)
				}
				if _, err := bob.VolumeCreate(ctx, api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "hot", Size: "1G", Node: nodeID}); err != nil {
					t.Fatal(err)
				}
				settleVolume(t, env, "hot", api.TaskVolumeCreate, hostproto.VolumeTaskResult{SizeBytes: 1 << 30})
			}},
		{name: "volume.attach again", c: bob, endpoint: api.EndpointVolumeAttach,
			req: func() any {
				return api.VolumeAttachRequest{Project: controldtest.ProjectName, Volume: "hot", Allocation: allocID}
			}, want: api.ErrConflict},
		{name: "volume.attach no allocation", c: bob, endpoint: api.EndpointVolumeAttach,
			req: api.VolumeAttachRequest{Project: controldtest.ProjectName, Volume: "hot"}, want: api.ErrInvalidArgument},
		{name: "volume.detach while attaching", c: bob, endpoint: api.EndpointVolumeDetach,
			req: api.VolumeDetachRequest{Project: controldtest.ProjectName, Volume: "hot"}, want: api.ErrConflict},
		{name: "volume.detach", c: bob, endpoint: api.EndpointVolumeDetach,
			req:   api.VolumeDetachRequest{Project: controldtest.ProjectName, Volume: "hot"},
			setup: func(t *testing.T) { settleVolume(t, env, "hot", api.TaskVolumeAttach, hostproto.VolumeTaskResult{}) }},
		{name: "volume.detach again", c: bob, endpoint: api.EndpointVolumeDetach,
			req: api.VolumeDetachRequest{Project: controldtest.ProjectName, Volume: "hot"}, want: api.ErrConflict},
		{name: "alloc.release", c: bob, endpoint: api.EndpointAllocRelease, req: func() any { return api.AllocReleaseRequest{ID: allocID} }},
		{name: "alloc.release again", c: bob, endpoint: api.EndpointAllocRelease, req: func() any { return api.AllocReleaseRequest{ID: allocID} }, want: api.ErrConflict},
		{name: "auth.ssh_cert", c: bob, endpoint: api.EndpointSSHCert, req: api.SSHCertRequest{PublicKey: sshPublicKey(t)}},
		{name: "auth.ssh_cert not a key", c: bob, endpoint: api.EndpointSSHCert, req: api.SSHCertRequest{PublicKey: "ssh-ed25519 nope"}, want: api.ErrInvalidArgument},
		{name: "auth.login", c: anon, endpoint: api.EndpointAuthLogin, req: api.LoginRequest{Email: "bob@example.test", Password: bobPassword}},
		{name: "auth.login wrong password", c: anon, endpoint: api.EndpointAuthLogin, req: api.LoginRequest{Email: "bob@example.test", Password: "not it"}, want: api.ErrUnauthenticated},
		{name: "auth.logout", c: bob, endpoint: api.EndpointAuthLogout},
		{name: "auth.logout again", c: bob, endpoint: api.EndpointAuthLogout, want: api.ErrUnauthenticated},
		{name: "auth.exchange", c: anon, endpoint: api.EndpointAuthExchange,
			req: func() any {
				return api.ExchangeRequest{IDToken: idToken(t, idp.Key, testidp.KeyID, idp.Claims(time.Now(), "ann", nil))}
			}},
		{name: "auth.exchange forged token", c: anon, endpoint: api.EndpointAuthExchange, req: api.ExchangeRequest{IDToken: "not.a.token"}, want: api.ErrUnauthenticated},
		{name: "gate.login", c: anon, endpoint: gateproto.EndpointGateLogin, req: func() any { return gateLogin(t, gatewayKey, nil) }},
		{name: "gate.login forged signature", c: anon, endpoint: gateproto.EndpointGateLogin,
			req: func() any { return gateLogin(t, gatewayKey, []byte("forged")) }, want: api.ErrUnauthenticated},

		{name: "admin.user_add", c: admin, endpoint: api.EndpointAdminUserAdd, req: api.UserAddRequest{Email: "carol@example.test", Role: api.RoleOperator}},
		{name: "admin.user_add existing email", c: admin, endpoint: api.EndpointAdminUserAdd, req: api.UserAddRequest{Email: "CAROL@example.test"}, want: api.ErrConflict},
		{name: "admin.user_add bad email", c: admin, endpoint: api.EndpointAdminUserAdd, req: api.UserAddRequest{Email: "carol"}, want: api.ErrInvalidArgument},
		{name: "admin.user_add bad role", c: admin, endpoint: api.EndpointAdminUserAdd, req: api.UserAddRequest{Email: "erin@example.test", Role: "gateway"}, want: api.ErrInvalidArgument},
		{name: "admin.user_add by a user", c: env.Client(env.Login(t, "dave@example.test", "another good password")), endpoint: api.EndpointAdminUserAdd,
			req: api.UserAddRequest{Email: "erin@example.test"}, want: api.ErrForbidden},
		{name: "admin.user_invite", c: admin, endpoint: api.EndpointAdminUserInvite, req: api.UserRef{User: "carol@example.test"},
			got: func(t *testing.T, resp json.RawMessage) {
				inviteCode = decoded[api.UserInviteResponse](t, resp).Invite.Code
			}},
		{name: "admin.user_invite unknown user", c: admin, endpoint: api.EndpointAdminUserInvite, req: api.UserRef{User: "ghost@example.test"}, want: api.ErrNotFound},
		{name: "project.add_member invited user", c: admin, endpoint: api.EndpointProjectAddMem, req: api.AddMemberRequest{Project: controldtest.ProjectName, Email: "carol@example.test", Role: api.ProjectMember}},
		{name: "auth.login with a wrong invite", c: anon, endpoint: api.EndpointAuthLogin, req: api.LoginRequest{Invite: "NOTACODE", Password: "a new password"}, want: api.ErrUnauthenticated},
		{name: "auth.login with the invite", c: anon, endpoint: api.EndpointAuthLogin, req: func() any { return api.LoginRequest{Invite: inviteCode, Password: "a new password"} }},
		{name: "auth.login with the used invite", c: anon, endpoint: api.EndpointAuthLogin, req: func() any { return api.LoginRequest{Invite: inviteCode, Password: "a new password"} }, want: api.ErrUnauthenticated},
		{name: "admin.user_disable", c: admin, endpoint: api.EndpointAdminUserDisable, req: api.UserRef{User: dave.ID}},
		{name: "admin.user_disable again", c: admin, endpoint: api.EndpointAdminUserDisable, req: api.UserRef{User: dave.ID}, want: api.ErrConflict},
		{name: "admin.user_disable oneself", c: admin, endpoint: api.EndpointAdminUserDisable, req: api.UserRef{User: controldtest.AdminEmail}, want: api.ErrInvalidArgument},
		{name: "admin.user_disable unknown user", c: admin, endpoint: api.EndpointAdminUserDisable, req: api.UserRef{User: "u-nobody"}, want: api.ErrNotFound},
		{name: "admin.user_enable", c: admin, endpoint: api.EndpointAdminUserEnable, req: api.UserRef{User: "dave@example.test"}},
		{name: "admin.user_enable again", c: admin, endpoint: api.EndpointAdminUserEnable, req: api.UserRef{User: "dave@example.test"}, want: api.ErrConflict},
		{name: "admin.user_link", c: admin, endpoint: api.EndpointAdminUserLink, req: api.UserLinkRequest{User: "dave@example.test", Issuer: "https://idp.example.test", Subject: "dave-1"}},
		{name: "admin.user_link taken identity", c: admin, endpoint: api.EndpointAdminUserLink, req: api.UserLinkRequest{User: "carol@example.test", Issuer: "https://idp.example.test", Subject: "dave-1"}, want: api.ErrConflict},
		{name: "admin.user_link bad issuer", c: admin, endpoint: api.EndpointAdminUserLink, req: api.UserLinkRequest{User: "dave@example.test", Issuer: "idp", Subject: "dave-2"}, want: api.ErrInvalidArgument},

		{name: "ops.ca_rotate", c: admin, endpoint: api.EndpointCARotate, req: api.CARotateRequest{CA: api.CAUser}},
		{name: "ops.ca_rotate unknown CA", c: admin, endpoint: api.EndpointCARotate, req: api.CARotateRequest{CA: "root"}, want: api.ErrInvalidArgument},
		{name: "ops.ca_retire", c: admin, endpoint: api.EndpointCARetire, req: api.CARotateRequest{CA: api.CAUser, KeyID: userCA.Keys[0].ID}},
		{name: "ops.ca_retire again", c: admin, endpoint: api.EndpointCARetire, req: api.CARotateRequest{CA: api.CAUser, KeyID: userCA.Keys[0].ID}, want: api.ErrConflict},
		{name: "ops.bus_identity_add", c: admin, endpoint: api.EndpointBusIdentityAdd,
			req: api.BusIdentityAddRequest{PublicKey: operatorKey, Kind: api.BusIdentityOperator, Name: "ops-1"}},
		{name: "ops.bus_identity_add not a key", c: admin, endpoint: api.EndpointBusIdentityAdd,
			req: api.BusIdentityAddRequest{PublicKey: "UNOPE", Kind: api.BusIdentityOperator, Name: "ops-2"}, want: api.ErrInvalidArgument},
		{name: "ops.bus_identity_revoke", c: admin, endpoint: api.EndpointBusIdentityRevoke, req: api.BusIdentityRevokeRequest{PublicKey: operatorKey}},
		{name: "ops.bus_identity_revoke again", c: admin, endpoint: api.EndpointBusIdentityRevoke, req: api.BusIdentityRevokeRequest{PublicKey: operatorKey}, want: api.ErrNotFound},

		{name: "ops.outbox_retry", c: admin, endpoint: api.EndpointOutboxRetry,
			req: func() any { return api.OutboxRef{ID: deadEvent(t, env)} }},
		{name: "ops.outbox_retry unknown id", c: admin, endpoint: api.EndpointOutboxRetry, req: api.OutboxRef{ID: 1 << 40}, want: api.ErrNotFound},
		{name: "ops.outbox_retry by an operator", c: operator, endpoint: api.EndpointOutboxRetry, req: api.OutboxRef{ID: 1}, want: api.ErrForbidden},
		{name: "ops.outbox_drop", c: admin, endpoint: api.EndpointOutboxDrop,
			req: func() any { return api.OutboxRef{ID: deadEvent(t, env)} }},
		{name: "ops.outbox_drop not dead", c: admin, endpoint: api.EndpointOutboxDrop,
			req: func() any { return api.OutboxRef{ID: int64(count(t, env, `SELECT min(id) FROM outbox_events`))} }, want: api.ErrConflict},

		{name: "billing.topup", c: admin, endpoint: api.EndpointBillingTopup, req: api.TopupRequest{AmountMinor: 5000},
			got: func(t *testing.T, resp json.RawMessage) { topupID = decoded[api.TopupResponse](t, resp).SessionID }},
		{name: "billing.topup below the minimum", c: admin, endpoint: api.EndpointBillingTopup, req: api.TopupRequest{AmountMinor: 1}, want: api.ErrInvalidArgument},
		{name: "admin.refund", c: admin, endpoint: api.EndpointAdminRefund,
			setup: func(t *testing.T) { payTopup(t, env, topupID, 5000) },
			req:   func() any { return api.RefundRequest{Topup: topupID, AmountMinor: 1000, Reason: "test"} }},
		{name: "admin.refund unknown top-up", c: admin, endpoint: api.EndpointAdminRefund, req: api.RefundRequest{Topup: "cs_nope"}, want: api.ErrNotFound},
		{name: "admin.credit", c: admin, endpoint: api.EndpointAdminCredit, req: api.CreditRequest{Project: controldtest.ProjectName, AmountMinor: 250, Reason: "outage"}},
		{name: "admin.volume_price_set", c: admin, endpoint: api.EndpointAdminVolumePriceSet, req: api.VolumePriceSetRequest{Currency: "usd", PricePerGiBMonthMinor: 10}},
		{name: "admin.volume_price_set in another currency", c: admin, endpoint: api.EndpointAdminVolumePriceSet, req: api.VolumePriceSetRequest{Currency: "eur", PricePerGiBMonthMinor: 10}, want: api.ErrInvalidArgument},
		{name: "admin.volume_price_set by an operator", c: operator, endpoint: api.EndpointAdminVolumePriceSet, req: api.VolumePriceSetRequest{PricePerGiBMonthMinor: 1}, want: api.ErrForbidden},
		{name: "admin.app_price_set unknown app", c: admin, endpoint: api.EndpointAdminAppPriceSet, req: api.AppPriceSetRequest{App: "ghost", PricePerHourMinor: 10}, want: api.ErrNotFound},
		{name: "admin.app_price_set negative", c: admin, endpoint: api.EndpointAdminAppPriceSet, req: api.AppPriceSetRequest{App: "ghost", PricePerHourMinor: -1}, want: api.ErrInvalidArgument},
		{name: "billing.budget_set", c: admin, endpoint: api.EndpointBillingBudgetSet, req: api.BudgetSetRequest{Project: controldtest.ProjectName, Period: api.BudgetDay, AmountMinor: 100}},
		{name: "billing.budget_set no cap", c: admin, endpoint: api.EndpointBillingBudgetSet, req: api.BudgetSetRequest{Project: controldtest.ProjectName}, want: api.ErrInvalidArgument},
		{name: "billing.budget_set by an operator", c: operator, endpoint: api.EndpointBillingBudgetSet, req: api.BudgetSetRequest{Project: controldtest.ProjectName, BurnCapMinorPerHour: 100}, want: api.ErrForbidden},
		{name: "billing.budget_clear", c: admin, endpoint: api.EndpointBillingBudgetClear, req: api.BudgetClearRequest{Project: controldtest.ProjectName}},
		{name: "billing.budget_clear again", c: admin, endpoint: api.EndpointBillingBudgetClear, req: api.BudgetClearRequest{Project: controldtest.ProjectName}, want: api.ErrNotFound},
		{name: "webhook.add", c: admin, endpoint: api.EndpointWebhookAdd,
			req: api.WebhookAddRequest{Project: controldtest.ProjectName, URL: "https://hooks.example.com/gpuaas", Events: []string{api.EventAllocState}},
			got: func(t *testing.T, resp json.RawMessage) { webhookID = decoded[api.Webhook](t, resp).ID }},
		{name: "webhook.add plain http", c: admin, endpoint: api.EndpointWebhookAdd,
			req: api.WebhookAddRequest{Project: controldtest.ProjectName, URL: "http://hooks.example.com/gpuaas", Events: []string{api.EventAllocState}}, want: api.ErrInvalidArgument},
		{name: "webhook.add loopback", c: admin, endpoint: api.EndpointWebhookAdd,
			req: api.WebhookAddRequest{Project: controldtest.ProjectName, URL: "https://127.0.0.1:8443/", Events: []string{api.EventAllocState}}, want: api.ErrInvalidArgument},
		{name: "webhook.add unknown event", c: admin, endpoint: api.EndpointWebhookAdd,
			req: api.WebhookAddRequest{Project: controldtest.ProjectName, URL: "https://hooks.example.com/gpuaas", Events: []string{"alloc.exploded"}}, want: api.ErrInvalidArgument},
		{name: "webhook.add by an operator", c: operator, endpoint: api.EndpointWebhookAdd,
			req: api.WebhookAddRequest{Project: controldtest.ProjectName, URL: "https://hooks.example.com/gpuaas", Events: []string{api.EventAllocState}}, want: api.ErrForbidden},
		{name: "webhook.test", c: admin, endpoint: api.EndpointWebhookTest, req: func() any { return api.WebhookRef{ID: webhookID} },
			got: func(t *testing.T, resp json.RawMessage) { deliveryID = decoded[api.WebhookDelivery](t, resp).ID }},
		{name: "webhook.test by an operator", c: operator, endpoint: api.EndpointWebhookTest, req: func() any { return api.WebhookRef{ID: webhookID} }, want: api.ErrForbidden},
		{name: "webhook.retry not dead", c: admin, endpoint: api.EndpointWebhookRetry, req: func() any { return api.WebhookDeliveryRef{ID: deliveryID} }, want: api.ErrConflict},
		{name: "webhook.retry", c: admin, endpoint: api.EndpointWebhookRetry, req: func() any { return api.WebhookDeliveryRef{ID: deliveryID} },
			setup: func(t *testing.T) {
				if _, err := env.Server.Pool().Exec(ctx, `UPDATE webhook_deliveries SET state = 'dead' WHERE id = $1`, deliveryID); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "webhook.rm by an operator", c: operator, endpoint: api.EndpointWebhookRemove, req: func() any { return api.WebhookRef{ID: webhookID} }, want: api.ErrForbidden},
		{name: "webhook.rm", c: admin, endpoint: api.EndpointWebhookRemove, req: func() any { return api.WebhookRef{ID: webhookID} }},
		{name: "webhook.rm again", c: admin, endpoint: api.EndpointWebhookRemove, req: func() any { return api.WebhookRef{ID: webhookID} }, want: api.ErrNotFound},
		{name: "admin.credit without a reason", c: admin, endpoint: api.EndpointAdminCredit, req: api.CreditRequest{Project: controldtest.ProjectName, AmountMinor: 250}, want: api.ErrInvalidArgument},

		{name: "image.publish", c: admin, endpoint: api.EndpointImagePublish, req: func() any {
			return api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, admin, "tiny"), Platform: true}
		}},
		{name: "image.publish same name", c: admin, endpoint: api.EndpointImagePublish, req: func() any {
			return api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, admin, "tiny"), Platform: true}
		}, want: api.ErrConflict},
		{name: "image.publish on the platform by a user", c: imageUser(t, env, "ivy1@example.test"), endpoint: api.EndpointImagePublish, req: func() any {
			return api.ImagePublishRequest{Name: "bobs", Ref: pushTestImage(t, admin, "ivy"), Platform: true}
		}, want: api.ErrForbidden},
		{name: "image.verify by a user", c: imageUser(t, env, "ivy2@example.test"), endpoint: api.EndpointImageVerify, req: api.ImageChangeRequest{Image: "tiny"}, want: api.ErrNotFound},
		{name: "image.verify", c: operator, endpoint: api.EndpointImageVerify, req: api.ImageChangeRequest{Image: "tiny"}},
		{name: "image.promote", c: operator, endpoint: api.EndpointImagePromote, req: api.ImageChangeRequest{Image: "tiny"}},
		{name: "image.promote again", c: admin, endpoint: api.EndpointImagePromote, req: api.ImageChangeRequest{Image: "tiny"}, want: api.ErrConflict},
		{name: "image.promote by a user", c: imageUser(t, env, "ivy3@example.test"), endpoint: api.EndpointImagePromote, req: api.ImageChangeRequest{Image: "tiny"}, want: api.ErrForbidden},
		{name: "app.run", c: admin, endpoint: api.EndpointAppRun, req: func() any {
			// A bare-metal allocation, made active by hand: no hostd here provisions it.
			a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
				t.Fatal(err)
			}
			appAllocID = a.ID
			return api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "web"}
		}, got: func(t *testing.T, resp json.RawMessage) { workloadID = decoded[api.Workload](t, resp).ID }},
		{name: "app.run name in use", c: admin, endpoint: api.EndpointAppRun, req: func() any { return api.AppRunRequest{Image: "tiny", AllocationID: appAllocID, Name: "web"} }, want: api.ErrConflict},
		{name: "app.run unknown image", c: admin, endpoint: api.EndpointAppRun, req: func() any { return api.AppRunRequest{Image: "ghost", AllocationID: appAllocID} }, want: api.ErrNotFound},
		{name: "app.run no image", c: admin, endpoint: api.EndpointAppRun, req: func() any { return api.AppRunRequest{AllocationID: appAllocID} }, want: api.ErrInvalidArgument},
		{name: "expose.create of a workload", c: admin, endpoint: api.EndpointExposeCreate, req: func() any {
			return api.ExposeCreateRequest{Allocation: workloadID, Port: 9000}
		}, got: func(t *testing.T, resp json.RawMessage) {
			if e := decoded[api.Exposure](t, resp); e.AllocationID != appAllocID || e.Port != 9000 {
				t.Errorf("a workload's exposure: %+v; want port 9000 of its allocation %s", e, appAllocID)
			}
		}},
		{name: "app.stop", c: admin, endpoint: api.EndpointAppStop, req: func() any { return api.WorkloadRef{ID: workloadID} }},
		{name: "app.stop again", c: admin, endpoint: api.EndpointAppStop, req: func() any { return api.WorkloadRef{ID: workloadID} }, want: api.ErrConflict},
		{name: "app.rm", c: admin, endpoint: api.EndpointAppRm, req: func() any { return api.WorkloadRef{ID: workloadID} }},
		{name: "app.rm again", c: admin, endpoint: api.EndpointAppRm, req: func() any { return api.WorkloadRef{ID: workloadID} }, want: api.ErrConflict},
		{name: "expose.create of a removed workload", c: admin, endpoint: api.EndpointExposeCreate, req: func() any {
			return api.ExposeCreateRequest{Allocation: workloadID, Port: 9001}
		}, want: api.ErrConflict},
		{name: "app.publish", c: admin, endpoint: api.EndpointAppPublish, req: api.AppPublishRequest{Manifest: "name: hello\nimage: tiny\ncommand: [/hello]\n", Platform: true}},
		{name: "app.publish same name", c: admin, endpoint: api.EndpointAppPublish, req: api.AppPublishRequest{Manifest: "name: hello\nimage: tiny\n", Platform: true}, want: api.ErrConflict},
		{name: "app.publish port 80", c: admin, endpoint: api.EndpointAppPublish, req: api.AppPublishRequest{Manifest: "name: web80\nimage: tiny\nports: [{name: web, port: 80}]\n", Platform: true}, want: api.ErrInvalidArgument},
		{name: "app.promote", c: admin, endpoint: api.EndpointAppPromote, req: api.AppRef{App: "hello"}},
		{name: "admin.app_price_set", c: admin, endpoint: api.EndpointAdminAppPriceSet, req: api.AppPriceSetRequest{App: "hello", PricePerHourMinor: 50}},
		{name: "app.promote by a user", c: imageUser(t, env, "ivy4@example.test"), endpoint: api.EndpointAppPromote, req: api.AppRef{App: "hello"}, want: api.ErrForbidden},
		{name: "app.deprecate", c: admin, endpoint: api.EndpointAppDeprecate, req: api.AppRef{App: "hello"}},
		{name: "app.retire", c: admin, endpoint: api.EndpointAppRetire, req: api.AppRef{App: "hello"}},
		{name: "app.retire again", c: admin, endpoint: api.EndpointAppRetire, req: api.AppRef{App: "hello"}, want: api.ErrConflict},
		{name: "image.deprecate", c: admin, endpoint: api.EndpointImageDeprecate, req: api.ImageChangeRequest{Image: "tiny"}},
		{name: "image.deprecate again", c: admin, endpoint: api.EndpointImageDeprecate, req: api.ImageChangeRequest{Image: "tiny"}, want: api.ErrConflict},
		{name: "image.revoke without a reason", c: admin, endpoint: api.EndpointImageRevoke, req: api.ImageChangeRequest{Image: "tiny"}, want: api.ErrInvalidArgument},
		{name: "image.revoke", c: admin, endpoint: api.EndpointImageRevoke, req: api.ImageChangeRequest{Image: "tiny", Reason: "test"}},
		{name: "image.retire", c: admin, endpoint: api.EndpointImageRetire, req: api.ImageChangeRequest{Image: "tiny"}},
		{name: "image.retire again", c: admin, endpoint: api.EndpointImageRetire, req: api.ImageChangeRequest{Image: "tiny"}, want: api.ErrConflict},
		{name: "image.retire unknown", c: admin, endpoint: api.EndpointImageRetire, req: api.ImageChangeRequest{Image: "ghost"}, want: api.ErrNotFound},
	}
	// Mutations with more than one event: disabling a user with a live
	// session also says which sessions ended.
	extraEvents := map[string]int{"admin.user_disable": 1}
	muts := mutations(env)
	succeeded := map[string]bool{}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if _, ok := muts[st.endpoint]; !ok {
				t.Fatalf("%s is not a mutation the server registers", st.endpoint)
			}
			if st.setup != nil {
				st.setup(t)
			}
			req := st.req
			if fn, ok := req.(func() any); ok {
				req = fn()
			}
			key := fmt.Sprintf("invariants-%d", i)
			before := countEffects(t, env)
			var resp json.RawMessage
			err := st.c.Mutate(ctx, st.endpoint, req, &resp, api.WithIdempotencyKey(key))
			after := countEffects(t, env)
			if !errors.Is(err, st.want) && !(st.want == nil && err == nil) {
				t.Fatalf("got %v; want %v", err, st.want)
			}
			if st.endpoint == api.EndpointAllocCreate && err == nil {
				before.allocations++
			}
			if st.endpoint == api.EndpointImageVerify && err == nil {
				// The verification runs after the request, in a
				// verifier, whose record is its own audit row and event
				// (no idempotency key): wait for it, then count the
				// request's rows alone.
				after = waitVerificationRecorded(t, env, req.(api.ImageChangeRequest).Image, after)
			}
			if after.allocations != before.allocations {
				t.Fatalf("allocations after: got %d; want %d", after.allocations, before.allocations)
			}
			checkEffects(t, env, st.endpoint, key, err, before, after, extraEvents[st.name])
			if err == nil {
				succeeded[st.endpoint] = true
				if st.got != nil {
					st.got(t, resp)
				}
			}
		})
	}
	for name := range muts {
		if !succeeded[name] {
			t.Errorf("mutation %s has no successful step: add one to this test", name)
		}
	}
}

// TestEveryMutationRefusedWritesNothing sends every mutating endpoint the
// server registers, as a caller it admits, a request it must refuse — no
// Idempotency-Key, then a body with a field no request has — and checks
// that the refusal leaves no row behind. It needs no list: a new mutation
// is covered as soon as it is registered.
func TestEveryMutationRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	env, _ := mutationEnv(t)
	ctx := t.Context()
	gateway := env.GatewayClient(t, "gw-1")
	if _, err := gateproto.GateSessions(ctx, gateway, gateproto.GateSessionsRequest{}); err != nil { // its gate.login, before counting
		t.Fatal(err)
	}
	for name, ep := range mutations(env) {
		t.Run(name, func(t *testing.T) {
			var c *api.Client
			switch ep.Access {
			case "public":
				c = env.AnonClient()
			case "logged_in":
				_, token := env.AddUser(t, strings.NewReplacer(".", "-", "_", "-").Replace(name)+"@example.test", api.RoleUser)
				c = env.Client(token)
			case "operator", "admin":
				c = env.Client(env.AdminToken)
			case "gateway":
				c = gateway
			default:
				t.Fatalf("mutation %s needs %q: teach this test who may call it", name, ep.Access)
			}
			before := countEffects(t, env)
			// Call, unlike Mutate, adds no key of its own.
			if err := c.Call(ctx, name, map[string]any{}, nil); !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("without a key: got %v; want invalid_argument", err)
			}
			if after := countEffects(t, env); after != before {
				t.Fatalf("a request without a key left rows: got %+v; want %+v", after, before)
			}
			key := "refused-" + name
			err := c.Mutate(ctx, name, map[string]any{"no_such_field": true}, nil, api.WithIdempotencyKey(key))
			after := countEffects(t, env)
			if err == nil {
				// An endpoint that reads no body (auth.logout) is not
				// refused: then it is a mutation like any other.
				checkEffects(t, env, name, key, err, before, after, 0)
				return
			}
			if after != before {
				t.Fatalf("refused with %v, it left rows: got %+v; want %+v", err, after, before)
			}
		})
	}
}

// payTopup delivers Stripe's report that a top-up's checkout was paid,
// signed as Stripe signs webhooks.
func payTopup(t *testing.T, env *controldtest.Env, sessionID string, amount int64) {
	t.Helper()
	payload, err := json.MarshalIndent(map[string]any{"id": "evt_" + sessionID, "object": "event", "api_version": payments.APIVersion,
		"type": "checkout.session.completed", "data": map[string]any{"object": map[string]any{
			"id": sessionID, "object": "checkout.session", "payment_status": "paid", "amount_total": amount,
			"currency": "usd", "client_reference_id": env.Project.ID, "payment_intent": "pi_" + sessionID}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testWebhookSecret, Timestamp: time.Now()})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+env.Server.HTTPAddr()+controld.StripeWebhookPath, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", signed.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: got %s; want 200", resp.Status)
	}
}

// decoded decodes a response.
func decoded[T any](t *testing.T, resp json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(resp, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// sshPublicKey is a fresh key in authorized_keys format.
func sshPublicKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(ssh.MarshalAuthorizedKey(k))
}

// newNKey is a fresh nkey user key pair and its public key.
func newNKey(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub
}

// gateLogin is the login assertion a gateway signs with its key (or
// carrying sig instead, when set).
func gateLogin(t *testing.T, key ed25519.PrivateKey, sig []byte) gateproto.GateLoginRequest {
	t.Helper()
	kp, err := bus.KeyFromEd25519Seed(key.Seed())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	req := gateproto.GateLoginRequest{PublicKey: pub, IssuedAt: time.Now().UTC(), Nonce: hex.EncodeToString(nonce[:])}
	if req.Signature = sig; sig == nil {
		if req.Signature, err = kp.Sign(gateproto.GateLoginMessage(req.PublicKey, req.IssuedAt, req.Nonce)); err != nil {
			t.Fatal(err)
		}
	}
	return req
}
