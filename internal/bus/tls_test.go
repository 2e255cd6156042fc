package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestTLSOptionsRefusePlaintextToRemote(t *testing.T) {
	tests := []struct {
		url     string
		tls     bus.TLS
		wantErr bool
	}{
		{url: "nats://127.0.0.1:4222"},
		{url: "nats://localhost:4222"},
		{url: "nats://[::1]:4222"},
		{url: "127.0.0.1:4222"},
		{url: "nats://10.0.0.5:4222", wantErr: true},
		{url: "nats://gpuaas.example.com:4222", wantErr: true},
		{url: "nats://127.0.0.1:4222,nats://10.0.0.5:4222", wantErr: true},
		{url: "nats://10.0.0.5:4222", tls: bus.TLS{AllowPlaintext: true}},
		{url: "tls://gpuaas.example.com:4222"},
		{url: "nats://10.0.0.5:4222", tls: bus.TLS{CAPEM: testutil.TLS(t).CAPEM}},
	}
	for _, tt := range tests {
		_, err := tt.tls.Options(tt.url)
		if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, bus.ErrPlaintext)) {
			t.Errorf("%s %+v: got %v; want error %v", tt.url, tt.tls.AllowPlaintext, err, tt.wantErr)
		}
	}
	if _, err := (bus.TLS{CAPEM: []byte("not pem")}).Options("nats://10.0.0.5:4222"); err == nil {
		t.Error("a CA that is not PEM was accepted")
	}
}

// TestTLSConnection: a server serving TLS is reached with its CA and
// refused without it (the system roots do not know a private CA).
func TestTLSConnection(t *testing.T) {
	files := testutil.TLS(t)
	b := testutil.NATSTLS(t, files)
	opts, err := bus.TLS{CAFile: files.CAFile}.Options(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	nc := b.Connect(t, opts...)
	if !nc.TLSRequired() {
		t.Error("the connection is not TLS")
	}
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Errorf("tls state: %v", err)
	}
	noCA, _ := bus.TLS{}.Options("tls://127.0.0.1:1")
	_, err = nats.Connect(b.URL, append(noCA, nats.Secure(), bus.WithKey(b.Keys.Controld))...)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("connecting without the CA got %v; want a certificate error", err)
	}
}
