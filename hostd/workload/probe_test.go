package workload

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// loopback dials the test's own loopback, as a bare-metal allocation's
// environment does.
func loopback(ctx context.Context, host string, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}

// TestProbe: a GET answering 2xx or 3xx (not followed) passes, 5xx and a
// closed port do not, each error naming the path or port; a TCP connect
// passes on a listening port.
func TestProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/nowhere", http.StatusFound) })
	mux.HandleFunc("/loading", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		p    api.WorkloadProbe
		want string // "" passes
	}{
		{"2xx", api.WorkloadProbe{Port: port, HTTPPath: "/ok"}, ""},
		{"3xx not followed", api.WorkloadProbe{Port: port, HTTPPath: "/moved"}, ""},
		{"503", api.WorkloadProbe{Port: port, HTTPPath: "/loading"}, "GET /loading on port " + strconv.Itoa(port) + ": 503 Service Unavailable"},
		{"tcp", api.WorkloadProbe{Port: port}, ""},
		{"tcp closed", api.WorkloadProbe{Port: closedPort}, "tcp connect to port " + strconv.Itoa(closedPort)},
		{"http closed", api.WorkloadProbe{Port: closedPort, HTTPPath: "/ok"}, "connection refused"},
	} {
		err := Probe(ctx, loopback, tt.p)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v; want %q", tt.name, err, tt.want)
		}
	}
}
