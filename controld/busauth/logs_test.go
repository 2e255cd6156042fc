package busauth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// TestLogSubjectsPermissions (docs/decisions/0022-logs-in-jetstream.md):
// a node publishes its jobs' logs into LOGS, acknowledged, under its own
// id only — another node's log subject is refused and never stored; a
// user can neither write a log, nor read one from the bus, nor reach
// JetStream's API for the LOGS stream.
func TestLogSubjectsPermissions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	nodeA, keyA := enrolledNode(t, env, "logs-a")
	nodeB, _ := enrolledNode(t, env, "logs-b")
	a := mustDial(t, env.NATSURL, nodeOpts(nodeA, keyA)...)
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	own := logstream.Subject(nodeA, logstream.KindJob, "j-a")
	ack, err := js.Publish(ctx, own, []byte(`{"lines":[{"n":1,"x":"mine"}]}`))
	if err != nil || ack.Stream != logstream.Stream {
		t.Fatalf("node A's own log: ack %+v, %v; want stored in %s", ack, err, logstream.Stream)
	}
	other := logstream.Subject(nodeB, logstream.KindJob, "j-b")
	a.refusedPub(t, other, []byte(`{"lines":[{"n":1,"x":"forged"}]}`))
	a.refusedSub(t, logstream.StreamSubjects, "")

	alice, aliceToken := env.AddUser(t, "alice@example.test", "user")
	u := mustDial(t, env.NATSURL, userOpts(alice.ID, aliceToken)...)
	u.refusedPub(t, logstream.Subject(nodeA, logstream.KindJob, "j-a"), []byte(`{"lines":[{"n":2,"x":"forged"}]}`))
	u.refusedSub(t, logstream.StreamSubjects, "")
	for _, subj := range []string{"$JS.API.CONSUMER.CREATE.LOGS", "$JS.API.STREAM.MSG.GET.LOGS", "$JS.API.DIRECT.GET.LOGS"} {
		u.refusedPub(t, subj, []byte(`{}`))
	}

	// LOGS holds node A's line and nothing forged.
	cjs, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := cjs.OrderedConsumer(ctx, logstream.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for m := range b.Messages() {
		subjects = append(subjects, m.Subject())
		if strings.Contains(string(m.Data()), "forged") {
			t.Errorf("LOGS holds a forged line on %s", m.Subject())
		}
	}
	if len(subjects) != 1 || subjects[0] != own {
		t.Fatalf("LOGS holds %v; want only %s", subjects, own)
	}
}
