package bus

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestEmbeddedServerRequestReplyAndJetStream(t *testing.T) {
	srv, err := Start(Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()

	nc, err := Connect(srv.ClientURL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	reply, err := nc.Request("echo", []byte("ping"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(reply.Data); got != "ping" {
		t.Fatalf("got %q; want ping", got)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("jetstream not enabled: %v", err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("1")); err != nil {
		t.Fatal(err)
	}
}

func TestStoreDirRequired(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("got nil error for a config without StoreDir; want an error")
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	srv, err := Start(Config{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := Connect(srv.ClientURL(), "test")
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "t.x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Shutdown()

	srv, err = Start(Config{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, _ = Connect(srv.ClientURL(), "test")
	defer nc.Close()
	js, _ = jetstream.New(nc)
	st, err := js.Stream(t.Context(), "T")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("got %d messages after restart; want 1", info.State.Msgs)
	}
}
