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

// request sends one raw API request, so that tests see the exact bytes of
// replies.
type request struct {
	endpoint, token, project, key string
	body                          string
}

func (r request) send(env *controldtest.Env) ([]byte, error) {
	msg := nats.NewMsg(api.Subject(r.endpoint))
	msg.Data = []byte(r.body)
	msg.Header.Set(api.HeaderAuthorization, "Bearer "+r.token)
	msg.Header.Set(api.HeaderProject, r.project)
	if r.key != "" {
		msg.Header.Set(api.HeaderIdempotencyKey, r.key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	reply, err := env.RequestMsg(ctx, msg)
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
	first, err := create.send(env)
	if err != nil {
		t.Fatalf("first create: %v", err)
	}
	var a api.Allocation
	if err := json.Unmarshal(first, &a); err != nil {
		t.Fatal(err)
	}
	tasks := func() int { return count(t, env, `SELECT count(*) FROM node_tasks`) }
	before, tasksBefore := countEffects(t, env), tasks()

	second, err := create.send(env)
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
			if _, err := tt.req.send(env); !errors.Is(err, api.ErrIdempotencyMismatch) {
				t.Fatalf("got %v; want idempotency_mismatch", err)
			}
		})
	}
	if got := countEffects(t, env); got != before {
		t.Fatalf("mismatched requests changed rows: got %+v; want %+v", got, before)
	}

	// Keys belong to their actor: bob's identical request is his own.
	theirs, err := with(create, func(r *request) { r.token = bobToken }).send(env)
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
	// A failure below must not leave the connection held: controld's
	// drain at cleanup would wait for it for ever (it hung a .ci/run).
	defer func() { _ = tx.Rollback(context.Background()) }()
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
		wg.Go(func() { replies[i], errs[i] = create.send(env) })
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
