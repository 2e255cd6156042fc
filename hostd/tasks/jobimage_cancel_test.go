package tasks_test

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// stallingRegistry serves ref's registry through a proxy whose blob
// reads never answer (until the client gives up or the test ends), and
// returns ref with its host, and a channel told of each stalled read and
// of each one the client abandoned.
func stallingRegistry(t *testing.T, ref string) (string, <-chan string) {
	t.Helper()
	host, rest, _ := strings.Cut(ref, "/")
	target, err := url.Parse("http://" + host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	seen := make(chan string, 64)
	done := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/blobs/") {
			proxy.ServeHTTP(w, r)
			return
		}
		seen <- "stalled"
		select {
		case <-r.Context().Done():
			seen <- "abandoned"
		case <-done:
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { close(done); _ = srv.Close() })
	return ln.Addr().String() + "/" + rest, seen
}

// TestJobInImageCancelDuringPull: job.stop while the job's image is being
// pulled (a registry that stalls) abandons the pull, starts no container
// and nothing of the job, and the job ends cancelled at phase image with
// no start, without waiting for the pull.
func TestJobInImageCancelDuringPull(t *testing.T) {
	_, env := podmanHost(t)
	ref, seen := stallingRegistry(t, tinyJobImage(t))
	alloc := "a-jcp" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	p := hostproto.JobStartParams{JobID: "j-imgpull", AllocationID: alloc, PosixUser: api.PosixUser(alloc), Wait: 0, Image: ref,
		Run: "echo ran; : > ~/ran"}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running, preparing its image", r)
	}
	select {
	case <-seen: // the pull waits on the registry
	case <-time.After(2 * time.Minute):
		t.Fatal("the pull never reached the registry's blobs")
	}
	out, _, err = run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: p.JobID, Grace: 30 * time.Second})
	if err != nil || !out.(api.JobStopReport).Signaled {
		t.Fatalf("stop: %v %+v; want signalled", err, out)
	}
	// The registry never answers: only an abandoned pull lets it end.
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: p.JobID, Wait: 2 * time.Minute})
	r := jobReport(t, out, err)
	if !r.Ended || !r.Cancelled || r.Phase != api.JobPhaseImage || r.StartedAt != nil || strings.Contains(r.Output, "ran") ||
		!strings.Contains(r.Reason, "cancelled while its image was prepared") {
		t.Fatalf("wait %+v; want ended, cancelled at phase image, nothing ran", r)
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Errorf("containers after the cancel: %q; want none", names)
	}
}
