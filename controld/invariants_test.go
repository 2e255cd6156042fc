package controld_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
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

func TestEveryMutationWritesOneAuditRowAndOneEvent(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
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
	var allocID, inviteCode string
	dave, _ := env.AddUser(t, "dave@example.test", api.RoleUser) // a user with a live session

	steps := []struct {
		name     string
		c        *api.Client
		endpoint string
		req      any
		want     error // nil: succeeds
	}{
		{"project.create", admin, api.EndpointProjectCreate, api.ProjectCreateRequest{Name: "second"}, nil},
		{"project.create duplicate name", admin, api.EndpointProjectCreate, api.ProjectCreateRequest{Name: "second"}, api.ErrConflict},
		{"project.create bad name", admin, api.EndpointProjectCreate, api.ProjectCreateRequest{Name: "X"}, api.ErrInvalidArgument},
		{"project.add_member", admin, api.EndpointProjectAddMem, api.AddMemberRequest{Project: controldtest.ProjectName, Email: "bob@example.test", Role: api.ProjectMember}, nil},
		{"project.add_member unknown email", admin, api.EndpointProjectAddMem, api.AddMemberRequest{Project: controldtest.ProjectName, Email: "ghost@example.test", Role: api.ProjectMember}, api.ErrNotFound},
		{"project.add_member by a member", bob, api.EndpointProjectAddMem, api.AddMemberRequest{Project: controldtest.ProjectName, Email: "bob@example.test", Role: api.ProjectOwner}, api.ErrForbidden},
		{"node.slots_approve", admin, api.EndpointSlotsApprove, api.SlotsApproveRequest{Node: pending.Name}, nil},
		{"node.slots_approve unknown node", admin, api.EndpointSlotsApprove, api.SlotsApproveRequest{Node: "ghost"}, api.ErrNotFound},
		{"node.slots_approve by a user", bob, api.EndpointSlotsApprove, api.SlotsApproveRequest{Node: pending.Name}, api.ErrForbidden},
		{"node.drain", admin, api.EndpointNodeDrain, api.NodeRef{Node: pending.Name}, nil},
		{"node.drain again", admin, api.EndpointNodeDrain, api.NodeRef{Node: pending.Name}, api.ErrConflict},
		{"alloc.create", bob, api.EndpointAllocCreate, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2}, nil},
		{"alloc.create no capacity", bob, api.EndpointAllocCreate, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1}, api.ErrNoCapacity},
		{"alloc.create unknown field", bob, api.EndpointAllocCreate, map[string]any{"sku": "h200-slice", "gpus": 1, "gpu": 2}, api.ErrInvalidArgument},
		{"alloc.release", bob, api.EndpointAllocRelease, &allocID, nil},
		{"alloc.release again", bob, api.EndpointAllocRelease, &allocID, api.ErrConflict},
		{"auth.login", api.NewClient(env.NC), api.EndpointAuthLogin, api.LoginRequest{Email: "bob@example.test", Password: bobPassword}, nil},
		{"auth.login wrong password", api.NewClient(env.NC), api.EndpointAuthLogin, api.LoginRequest{Email: "bob@example.test", Password: "not it"}, api.ErrUnauthenticated},
		{"auth.logout", bob, api.EndpointAuthLogout, nil, nil},
		{"auth.logout again", bob, api.EndpointAuthLogout, nil, api.ErrUnauthenticated},

		{"admin.user_add", admin, api.EndpointAdminUserAdd, api.UserAddRequest{Email: "carol@example.test", Role: api.RoleOperator}, nil},
		{"admin.user_add existing email", admin, api.EndpointAdminUserAdd, api.UserAddRequest{Email: "CAROL@example.test"}, api.ErrConflict},
		{"admin.user_add bad email", admin, api.EndpointAdminUserAdd, api.UserAddRequest{Email: "carol"}, api.ErrInvalidArgument},
		{"admin.user_add bad role", admin, api.EndpointAdminUserAdd, api.UserAddRequest{Email: "erin@example.test", Role: "gateway"}, api.ErrInvalidArgument},
		{"admin.user_add by a user", env.Client(env.Login(t, "dave@example.test", "another good password")), api.EndpointAdminUserAdd,
			api.UserAddRequest{Email: "erin@example.test"}, api.ErrForbidden},
		{"admin.user_invite", admin, api.EndpointAdminUserInvite, api.UserRef{User: "carol@example.test"}, nil},
		{"admin.user_invite unknown user", admin, api.EndpointAdminUserInvite, api.UserRef{User: "ghost@example.test"}, api.ErrNotFound},
		{"project.add_member invited user", admin, api.EndpointProjectAddMem, api.AddMemberRequest{Project: controldtest.ProjectName, Email: "carol@example.test", Role: api.ProjectMember}, nil},
		{"auth.login with a wrong invite", api.NewClient(env.NC), api.EndpointAuthLogin, api.LoginRequest{Invite: "NOTACODE", Password: "a new password"}, api.ErrUnauthenticated},
		{"auth.login with the invite", api.NewClient(env.NC), api.EndpointAuthLogin, func() any { return api.LoginRequest{Invite: inviteCode, Password: "a new password"} }, nil},
		{"auth.login with the used invite", api.NewClient(env.NC), api.EndpointAuthLogin, func() any { return api.LoginRequest{Invite: inviteCode, Password: "a new password"} }, api.ErrUnauthenticated},
		{"admin.user_disable", admin, api.EndpointAdminUserDisable, api.UserRef{User: dave.ID}, nil},
		{"admin.user_disable again", admin, api.EndpointAdminUserDisable, api.UserRef{User: dave.ID}, api.ErrConflict},
		{"admin.user_disable oneself", admin, api.EndpointAdminUserDisable, api.UserRef{User: controldtest.AdminEmail}, api.ErrInvalidArgument},
		{"admin.user_disable unknown user", admin, api.EndpointAdminUserDisable, api.UserRef{User: "u-nobody"}, api.ErrNotFound},
		{"admin.user_enable", admin, api.EndpointAdminUserEnable, api.UserRef{User: "dave@example.test"}, nil},
		{"admin.user_enable again", admin, api.EndpointAdminUserEnable, api.UserRef{User: "dave@example.test"}, api.ErrConflict},
		{"admin.user_link", admin, api.EndpointAdminUserLink, api.UserLinkRequest{User: "dave@example.test", Issuer: "https://idp.example.test", Subject: "dave-1"}, nil},
		{"admin.user_link taken identity", admin, api.EndpointAdminUserLink, api.UserLinkRequest{User: "carol@example.test", Issuer: "https://idp.example.test", Subject: "dave-1"}, api.ErrConflict},
		{"admin.user_link bad issuer", admin, api.EndpointAdminUserLink, api.UserLinkRequest{User: "dave@example.test", Issuer: "idp", Subject: "dave-2"}, api.ErrInvalidArgument},
	}
	// Mutations with more than one event: disabling a user with a live
	// session also says which sessions ended.
	extraEvents := map[string]int{"admin.user_disable": 1}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			req := st.req
			if id, ok := req.(*string); ok {
				req = api.AllocReleaseRequest{ID: *id}
			}
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
			want := before
			if st.want != nil && st.endpoint == api.EndpointAuthLogin {
				want.audit++ // a refused login is audited in a write of its own
			}
			if st.want == nil {
				want.audit++
				want.outbox += 1 + extraEvents[st.name]
				want.keys++
				if st.endpoint == api.EndpointAllocCreate {
					want.allocations++
					var a api.Allocation
					if err := json.Unmarshal(resp, &a); err != nil {
						t.Fatal(err)
					}
					allocID = a.ID
				}
				if st.endpoint == api.EndpointAdminUserInvite {
					var r api.UserInviteResponse
					if err := json.Unmarshal(resp, &r); err != nil {
						t.Fatal(err)
					}
					inviteCode = r.Invite.Code
				}
				if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE idempotency_key = $1`, key); n != 1 {
					t.Errorf("audit rows carrying key %s: got %d; want 1", key, n)
				}
			}
			if after != want {
				t.Fatalf("rows after: got %+v; want %+v", after, want)
			}
		})
	}
}

// request sends one raw API request, so that tests see the exact bytes of
// replies.
type request struct {
	endpoint, token, project, key string
	body                          string
}

func (r request) send(nc *nats.Conn) ([]byte, error) {
	msg := nats.NewMsg(api.Subject(r.endpoint))
	msg.Data = []byte(r.body)
	msg.Header.Set(api.HeaderAuthorization, "Bearer "+r.token)
	msg.Header.Set(api.HeaderProject, r.project)
	if r.key != "" {
		msg.Header.Set(api.HeaderIdempotencyKey, r.key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", r.endpoint, err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		e := &api.Error{}
		if err := json.Unmarshal(reply.Data, e); err != nil {
			return nil, fmt.Errorf("error reply %q: %w", reply.Data, err)
		}
		return nil, e
	}
	return reply.Data, nil
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	create := request{endpoint: api.EndpointAllocCreate, token: env.AdminToken, project: env.Project.Name,
		key: "replay-1", body: `{"sku":"h200-slice","gpus":2}`}
	first, err := create.send(env.NC)
	if err != nil {
		t.Fatalf("first create: %v", err)
	}
	var a api.Allocation
	if err := json.Unmarshal(first, &a); err != nil {
		t.Fatal(err)
	}
	tasks := func() int { return count(t, env, `SELECT count(*) FROM node_tasks`) }
	before, tasksBefore := countEffects(t, env), tasks()

	second, err := create.send(env.NC)
	if err != nil {
		t.Fatalf("replayed create: %v", err)
	}
	if !bytes.Equal(second, first) {
		t.Fatalf("replay got\n%s\nwant the first response byte for byte:\n%s", second, first)
	}
	// The typed client with the same key sees the same allocation.
	same, err := env.Client(env.AdminToken).AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2},
		api.WithIdempotencyKey(create.key))
	if err != nil || same.ID != a.ID {
		t.Fatalf("typed replay got %v, allocation %s; want %s", err, same.ID, a.ID)
	}
	if got := countEffects(t, env); got != before || tasks() != tasksBefore {
		t.Fatalf("replays changed rows: got %+v, %d tasks; want %+v, %d tasks", got, tasks(), before, tasksBefore)
	}

	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := env.Client(env.AdminToken).ProjectAddMember(ctx, api.AddMemberRequest{Project: env.Project.Name,
		Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client(env.AdminToken).ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	before = countEffects(t, env)
	mismatches := []struct {
		name string
		req  request
	}{
		{"other body", with(create, func(r *request) { r.body = `{"sku":"h200-slice","gpus":1}` })},
		{"same body, reformatted", with(create, func(r *request) { r.body = `{"gpus":2,"sku":"h200-slice"}` })},
		{"other project header", with(create, func(r *request) { r.project = "other" })},
		{"other endpoint", with(create, func(r *request) { r.endpoint, r.body = api.EndpointProjectCreate, `{"name":"third"}` })},
	}
	for _, tt := range mismatches {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.req.send(env.NC); !errors.Is(err, api.ErrIdempotencyMismatch) {
				t.Fatalf("got %v; want idempotency_mismatch", err)
			}
		})
	}
	if got := countEffects(t, env); got != before {
		t.Fatalf("mismatched requests changed rows: got %+v; want %+v", got, before)
	}

	// Keys belong to their actor: bob's identical request is his own.
	theirs, err := with(create, func(r *request) { r.token = bobToken }).send(env.NC)
	if err != nil {
		t.Fatalf("bob's create with the admin's key: %v", err)
	}
	var b api.Allocation
	if err := json.Unmarshal(theirs, &b); err != nil {
		t.Fatal(err)
	}
	if b.ID == a.ID || b.UserID != bob.ID {
		t.Fatalf("bob got allocation %s of %s; want a new one of his own", b.ID, b.UserID)
	}
}

func with(r request, edit func(*request)) request {
	edit(&r)
	return r
}

func TestIdempotencyInFlightDuplicateConflicts(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	const key = "in-flight"
	req := api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}

	// Hold the key's lock as the first request would while it runs.
	tx, err := env.Server.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 42))`, env.Admin.ID+"\n"+key); err != nil {
		t.Fatal(err)
	}
	before := countEffects(t, env)
	_, err = c.AllocCreate(ctx, req, api.WithIdempotencyKey(key))
	if !errors.Is(err, api.ErrConflict) {
		t.Fatalf("duplicate while in flight got %v; want conflict", err)
	}
	if got := countEffects(t, env); got != before {
		t.Fatalf("refused duplicate changed rows: got %+v; want %+v", got, before)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := c.AllocCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil {
		t.Fatalf("retry after the first finished got %v; want success", err)
	}
	again, err := c.AllocCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil || again.ID != a.ID {
		t.Fatalf("replay got %v, allocation %s; want %s", err, again.ID, a.ID)
	}
}

func TestIdempotencyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	create := request{endpoint: api.EndpointAllocCreate, token: env.AdminToken, project: env.Project.Name,
		key: "stampede", body: `{"sku":"h200-slice","gpus":1}`}
	const n = 16
	replies := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { replies[i], errs[i] = create.send(env.NC) })
	}
	wg.Wait()
	var winner []byte
	for i := range n {
		switch {
		case errs[i] == nil && winner == nil:
			winner = replies[i]
		case errs[i] == nil && !bytes.Equal(replies[i], winner):
			t.Errorf("reply %d got\n%s\nwant the same bytes as\n%s", i, replies[i], winner)
		case errs[i] != nil && !errors.Is(errs[i], api.ErrConflict):
			t.Errorf("reply %d got %v; want success or conflict", i, errs[i])
		}
	}
	if winner == nil {
		t.Fatalf("all %d duplicates were refused; want one to succeed", n)
	}
	allocs, keys := count(t, env, `SELECT count(*) FROM allocations`),
		count(t, env, `SELECT count(*) FROM idempotency_keys WHERE key = $1`, create.key)
	if allocs != 1 || keys != 1 {
		t.Fatalf("after %d duplicates got %d allocations, %d idempotency keys; want 1, 1", n, allocs, keys)
	}
}

func TestIdempotencyFailedMutationCanBeRetried(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	const key = "retry-me"
	req := api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1}
	before := countEffects(t, env)
	if _, err := c.AllocCreate(ctx, req, api.WithIdempotencyKey(key)); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("create without capacity got %v; want no_capacity", err)
	}
	if got := countEffects(t, env); got != before {
		t.Fatalf("failed create changed rows: got %+v; want %+v", got, before)
	}
	// Capacity appears; the same key and body now succeed.
	n, err := node.Register(ctx, env.Server.Pool(), controldtest.SliceNode("h100-slices", "H100"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SlotsApprove(ctx, api.SlotsApproveRequest{Node: n.ID}); err != nil {
		t.Fatal(err)
	}
	a, err := c.AllocCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil {
		t.Fatalf("retry with the same key got %v; want success", err)
	}
	if a.NodeID != n.ID {
		t.Fatalf("placed on %s; want %s", a.NodeID, n.ID)
	}
	again, err := c.AllocCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil || again.ID != a.ID {
		t.Fatalf("replay got %v, allocation %s; want %s", err, again.ID, a.ID)
	}
}

func TestIdempotencyKeyRequired(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	tests := []struct {
		name     string
		endpoint string
		req      any
		opts     []api.CallOption
	}{
		{"alloc.create without key", api.EndpointAllocCreate, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, nil},
		{"project.create without key", api.EndpointProjectCreate, api.ProjectCreateRequest{Name: "keyless"}, nil},
		{"auth.logout without key", api.EndpointAuthLogout, nil, nil},
		{"auth.login without key", api.EndpointAuthLogin, api.LoginRequest{Email: controldtest.AdminEmail, Password: controldtest.AdminPassword}, nil},
		{"key too long", api.EndpointAllocCreate, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1},
			[]api.CallOption{api.WithIdempotencyKey(strings.Repeat("k", 201))}},
		{"key not printable", api.EndpointAllocCreate, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1},
			[]api.CallOption{api.WithIdempotencyKey("tab\tkey")}},
	}
	before := countEffects(t, env)
	sessions := count(t, env, `SELECT count(*) FROM sessions`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Call, unlike Mutate, adds no key of its own.
			if err := c.Call(ctx, tt.endpoint, tt.req, nil, tt.opts...); !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("got %v; want invalid_argument", err)
			}
		})
	}
	if got := countEffects(t, env); got != before {
		t.Fatalf("keyless requests changed rows: got %+v; want %+v", got, before)
	}
	if got := count(t, env, `SELECT count(*) FROM sessions`); got != sessions {
		t.Fatalf("keyless login opened sessions: got %d; want %d", got, sessions)
	}
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatalf("keyless logout ended the session: %v", err)
	}
}
