package testutil

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/bus"
)

// NATS starts a real embedded NATS server with JetStream on a random
// loopback port for the test and returns its client URL. It stops at
// cleanup.
func NATS(t testing.TB) string {
	t.Helper()
	srv, err := bus.Start(bus.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv.ClientURL()
}

// Connect dials url and closes the connection at cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(url, t.Name(), opts...)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
