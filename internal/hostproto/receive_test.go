package hostproto

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/signing"
	"github.com/nats-io/nats.go"
)

// TestReceiversMatchTheDeclaration: a receiver is refused for a message
// of the other side or of the other sealing, so a handler's body type is
// the one the message declares.
func TestReceiversMatchTheDeclaration(t *testing.T) {
	// No connection is needed: the declaration is checked first.
	refused := func(name string, err error) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), "hostproto: ") {
			t.Errorf("%s: err %v, want the declaration's refusal", name, err)
		}
	}
	_, err := Subscribe(nil, MsgTask, "n-1", func(Inbound[signing.Task, Sealed[TaskReply]]) {})
	refused("Subscribe of the sealed MsgTask", err)
	_, err = SubscribeSealed(nil, MsgLogs, "n-1", func(Inbound[Sealed[HostLogsRequest], api.NodeLogsResponse]) {})
	refused("SubscribeSealed of the plain MsgLogs", err)
	_, err = Subscribe(nil, MsgEnroll, "n-1", func(Inbound[EnrollRequest, EnrollResponse]) {})
	refused("hostd subscribing to its own MsgEnroll", err)
	_, err = Deliver(nil, MsgResult, "n-1", Sealed[TaskResult]{})
	refused("Deliver of hostd's MsgResult", err)
	panics := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	panics("Serve of a sealed report", func() {
		Serve(MsgHeartbeat, func(context.Context, Inbound[Heartbeat, HostAck]) (*HostAck, error) { return nil, nil })
	})
	panics("ServeSealed of enrollment", func() {
		ServeSealed(MsgEnroll, func(context.Context, Inbound[Sealed[EnrollRequest], EnrollResponse]) (*EnrollResponse, error) {
			return nil, nil
		})
	})
	panics("ServeSealed of controld's MsgTask", func() {
		ServeSealed(MsgTask, func(context.Context, Inbound[Sealed[signing.Task], Sealed[TaskReply]]) (*Sealed[TaskReply], error) {
			return nil, nil
		})
	})
}

// TestInboundDecodesAsDeclared: a body is handed over decoded as the
// message declares, with the digest of the bytes received, and one that
// does not decode carries encoding/json's error (receivers word their
// refusal with it).
func TestInboundDecodesAsDeclared(t *testing.T) {
	body := []byte(`{"pcis":["0000:3b:00.0"]}`)
	in := MsgTop.Inbound(&nats.Msg{Subject: MsgTop.SubjectOf("n-1"), Data: body})
	if in.Err != nil || len(in.Body.PCIs) != 1 || in.Body.PCIs[0] != "0000:3b:00.0" || in.Subject != "gpuaas.host.n-1.top" {
		t.Fatalf("decoded %+v", in)
	}
	if string(in.Digest()) != string(DeliveryDigest(body)) {
		t.Error("digest is not of the body received")
	}
	bad := MsgTop.Inbound(&nats.Msg{Data: []byte(`{"pcis":`)})
	var syntax *json.SyntaxError
	if !errors.As(bad.Err, &syntax) {
		t.Errorf("malformed body: err %v, want encoding/json's", bad.Err)
	}
	if err := in.Reply(&HostTopResponse{}); err == nil {
		t.Error("replied to a request that asked for no reply")
	}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	sealed, err := Seal(key, &TaskReply{Status: TaskAccepted, TaskID: "t-1"})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal(sealed)
	tin := MsgTask.InboundSealed(&nats.Msg{Data: env})
	var back TaskReply
	if tin.Err != nil || Open(key.Public().(ed25519.PublicKey), Sealed[TaskReply](tin.Body), &back) != nil || back.TaskID != "t-1" {
		t.Errorf("sealed body: %v, opened %+v", tin.Err, back)
	}
}
