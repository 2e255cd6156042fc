package controld_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// replyTargets are subjects a confused deputy could be made to publish to:
// another user's events and inbox, a node's tasks and reports, the
// gateways' notices and revocations, the EVENTS stream, the JetStream API
// and the recordings bucket.
// Subjects that legitimate traffic uses too are named so that it does not
// (a kind "deputy", a node "n-deputy").
func replyTargets(victimUID string) []string {
	return []string{
		api.UserEventSubject(victimUID, "deputy"),
		api.UserInboxPrefix(victimUID) + ".deputy.1",
		hostproto.MsgTask.SubjectOf("n-deputy"),
		hostproto.MsgResult.SubjectOf("n-deputy"),
		gateproto.GateNoticeSubject,
		gateproto.GateRevokedSubject,
		api.EventSubject("deputy"),
		"$JS.API.STREAM.PURGE." + api.EventStreamName,
		"$JS.API.STREAM.DELETE." + api.EventStreamName,
		"gpuaas.rec.deputy.meta",
		"gpuaas.rec.deputy.c.0",
		"$JS.API.STREAM.PURGE." + recstore.Stream,
		api.ControldInboxPrefix + ".deputy",
		api.ControldAPIInboxPrefix + ".deputy",
	}
}

// TestReplySubjectOutsideTheCallersInboxIsDropped: controld executes and
// answers a request only on the inbox of the identity it proves. Requests
// from a client that never logged in, one with a forged proof, and
// another user's session, each aimed with every reply subject a
// confused deputy could be made to publish to, are dropped: nothing
// arrives on any of them, nothing is stored in the streams, and a
// mutation among them is not executed.
func TestReplySubjectOutsideTheCallersInboxIsDropped(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	victim, victimToken := env.AddUser(t, "victim@example.test", api.RoleUser)
	_, malloryToken := env.AddUser(t, "mallory@example.test", api.RoleUser)
	targets := replyTargets(victim.ID)

	// Everything that reaches a target is seen on controld's own
	// connection, which may read everything.
	var mu sync.Mutex
	var seen []string
	for _, subj := range targets {
		if _, err := env.NC.Subscribe(subj, func(m *nats.Msg) {
			mu.Lock()
			seen = append(seen, m.Subject)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}

	// The attackers: a connection with a key of its own and no login, the
	// same with another key's proof, and another user's session.
	anonKey, _ := nkeys.CreateUser()
	anonOpts, _, err := api.KeyConnOptions(anonKey)
	if err != nil {
		t.Fatal(err)
	}
	anon := testutil.Connect(t, env.NATSURL, anonOpts...)
	otherKey, _ := nkeys.CreateUser()
	forged, err := api.ReplyProof(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	mallory := env.UserConn(t, mustSubject(t, malloryToken), malloryToken)
	attacks := []struct {
		name   string
		nc     *nats.Conn
		header nats.Header
	}{
		{"anonymous", anon, nats.Header{}},
		{"anonymous with a forged proof", anon, nats.Header{api.HeaderReplyProof: {forged}}},
		{"another user's session", mallory, nats.Header{api.HeaderAuthorization: {"Bearer " + malloryToken}}},
	}
	dropped := func() float64 {
		return env.Server.RepliesRefused("not_an_inbox") + env.Server.RepliesRefused("bad_proof") +
			env.Server.RepliesRefused("not_callers_inbox")
	}
	sent := 0
	start := dropped()
	for _, a := range attacks {
		for i, target := range targets {
			for _, ep := range []string{api.EndpointAuthConfig, api.EndpointProjectCreate} {
				h := nats.Header{}
				for k, v := range a.header {
					h[k] = v
				}
				h.Set(api.HeaderIdempotencyKey, fmt.Sprintf("deputy-%s-%d-%s", a.name, i, ep))
				body, _ := json.Marshal(api.ProjectCreateRequest{Name: fmt.Sprintf("deputy%d", sent)})
				if err := a.nc.PublishMsg(&nats.Msg{Subject: api.Subject(ep), Reply: target, Header: h, Data: body}); err != nil {
					t.Fatalf("%s: publish: %v", a.name, err)
				}
				sent++
			}
		}
		if err := a.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyWithin(t, 20*time.Second, "controld to drop every request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return dropped()-start >= float64(sent) || len(seen) > 0
	})
	// A request answered after them has been handled after them on every
	// lane it shares: let anything stray arrive, then look.
	if _, err := env.Client(victimToken).Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	_ = env.NC.Flush()
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) > 0 {
		t.Fatalf("controld published to attacker-chosen subjects: %v", got)
	}
	for stream, subjects := range map[string][]string{api.EventStreamName: {api.EventSubject("deputy")},
		recstore.Stream: {"gpuaas.rec.deputy.>"}} {
		for _, subj := range subjects {
			if n := streamMsgs(t, js, stream, subj); n != 0 {
				t.Fatalf("stream %s holds %d messages on %s after the attack; want none", stream, n, subj)
			}
		}
	}
	var projects int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM projects WHERE name LIKE 'deputy%'`).Scan(&projects); err != nil || projects != 0 {
		t.Fatalf("%d projects created by dropped requests (%v); want none", projects, err)
	}
}

// TestReplyOnTheCallersInboxIsAnswered: the same requests on the
// caller's own inbox are answered — a key's with its proof, a user's on
// theirs, an ended session's "your session has expired" on its user's.
func TestReplyOnTheCallersInboxIsAnswered(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	user, token := env.AddUser(t, "ada@example.test", api.RoleUser)
	if _, err := env.UserClient(t, user.ID, token).Whoami(ctx); err != nil {
		t.Fatalf("a user's own inbox: %v", err)
	}
	if _, err := env.AnonClient().AuthConfig(ctx); err != nil {
		t.Fatalf("a key's own inbox with its proof: %v", err)
	}
	// The session ends; the user's connection asks once more before the
	// server closes it: the answer says why, on the user's own inbox.
	conn := env.UserConn(t, user.ID, token)
	if _, err := env.Client(token).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(api.Subject(api.EndpointAuthWhoami))
	msg.Header.Set(api.HeaderAuthorization, "Bearer "+token)
	reply, err := conn.RequestMsg(msg, 5*time.Second)
	if err != nil && conn.IsClosed() {
		t.Skip("the server closed the connection before the request: nothing to check")
	}
	if err != nil {
		t.Fatalf("an ended session's request got %v; want controld's answer", err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != string(api.CodeUnauthenticated) {
		t.Fatalf("got error code %q; want %s", code, api.CodeUnauthenticated)
	}
}

// streamMsgs counts the messages stream holds on subjects (a filter).
func streamMsgs(t *testing.T, js jetstream.JetStream, name, subjects string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subjects))
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

func mustSubject(t *testing.T, token string) string {
	t.Helper()
	uid := api.TokenUserID(token)
	if uid == "" {
		t.Fatal("not a session token")
	}
	return uid
}
