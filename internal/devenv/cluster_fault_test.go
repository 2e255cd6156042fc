package devenv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// Load of the fault test: workers each create and release cycles
// allocations of one GPU, one at a time.
const (
	faultWorkers = 4
	faultCycles  = 12
	// faultAttempt is a request's per-attempt timeout: a request caught
	// on the stopped server is retried (same idempotency key) after it.
	faultAttempt = 2 * time.Second
)

// retrier runs requests until they succeed, retrying what a lost server
// causes with the same idempotency key, and counts what a client sees.
type retrier struct {
	t *testing.T
	// errors counts failed attempts; retried ones among them.
	errors atomic.Int64
	// mu protects the following.
	mu sync.Mutex
	// lastFail is when each worker's latest failed attempt began, zero
	// after a success; outage the longest run of failures.
	lastFail map[int]time.Time
	outage   time.Duration
	byCode   map[string]int
}

// retryable says whether err is what losing a NATS server (or a request
// caught with it) looks like to a client: a timeout, no responders, or
// the first attempt of the same key still in progress.
func retryable(err error) bool {
	var e *api.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code == api.CodeUnavailable || e.Code == api.CodeRateLimited ||
		(e.Code == api.CodeConflict && strings.Contains(e.Message, "still in progress"))
}

func (r *retrier) do(ctx context.Context, worker int, what string, call func(context.Context) error) {
	r.t.Helper()
	for {
		began := time.Now()
		actx, cancel := context.WithTimeout(ctx, faultAttempt)
		err := call(actx)
		cancel()
		r.mu.Lock()
		if err == nil {
			if f, ok := r.lastFail[worker]; ok {
				r.outage = max(r.outage, time.Since(f))
				delete(r.lastFail, worker)
			}
			r.mu.Unlock()
			return
		}
		if _, ok := r.lastFail[worker]; !ok {
			r.lastFail[worker] = began
		}
		var e *api.Error
		code := "other"
		if errors.As(err, &e) {
			code = string(e.Code)
		}
		r.byCode[code]++
		r.mu.Unlock()
		r.errors.Add(1)
		if !retryable(err) || ctx.Err() != nil {
			r.t.Errorf("worker %d %s: %v", worker, what, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterLosesNoRequestNorEventWhenANATSServerStops is the fault test
// "stop one of three NATS servers under load": 4 clients create and
// release allocations while a watcher follows the user's events
// (api.Client.SubscribeEvents, as `gpuaas watch` does); the server the
// watcher is connected to is stopped a third of the way in (events keep
// flowing), started again at half way, and the EVENTS stream's leader is
// stopped at two thirds. Every request
// succeeds (retried with the same key on timeouts and no-responders),
// no allocation is left behind, and the watcher sees every event the
// stream holds for the user exactly once.
func TestClusterLosesNoRequestNorEventWhenANATSServerStops(t *testing.T) {
	env, err := devenv.Start(context.Background(), devenv.Config{DataDir: t.TempDir(),
		DatabaseURL: testutil.Postgres(t, controldtest.Template), Hosts: 1, AdminPassword: "fault test password",
		Cluster: true, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	login, err := env.Controld.Identity().Login(ctx, env.Controld.Pool(), devenv.AdminEmail, "fault test password")
	if err != nil {
		t.Fatal(err)
	}
	// Two faults, one server down at a time: first the watcher's server
	// while events keep flowing (only resuming from the stream saves the
	// events sent while it moves), then, with that one back, the EVENTS
	// stream's leader (JetStream elects another while clients move).
	leader, err := eventsLeader(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	victim := (leader + 1) % env.NATSCluster.Len()
	client := func(name, url string, extra ...nats.Option) *api.Client {
		opts, ok := api.SessionConnOptions(login.Token)
		if !ok {
			t.Fatalf("no session token: %q", login.Token)
		}
		nc, err := bus.Connect(url, name, append(opts, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return api.NewClient(nc, api.WithToken(login.Token), api.WithTimeout(faultAttempt))
	}

	// The watcher: subscribed first, then the stream's position, so every
	// event after it is one the watcher must deliver.
	// ...on the server to stop (listed first, not shuffled).
	urls := []string{env.NATSCluster.ServerURL(victim)}
	for i := range env.NATSCluster.Len() {
		if i != victim {
			urls = append(urls, env.NATSCluster.ServerURL(i))
		}
	}
	watcher := client("watcher", strings.Join(urls, ","), nats.DontRandomize())
	if watcher.Conn().ConnectedUrl() != urls[0] {
		t.Fatalf("watcher on %s; want %s", watcher.Conn().ConnectedUrl(), urls[0])
	}
	events, err := watcher.SubscribeEvents(ctx, env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := watcher.EventsSince(ctx, api.EventsSinceRequest{Tail: true})
	if err != nil {
		t.Fatal(err)
	}
	start := tail.Next
	var seenMu sync.Mutex
	seen, repeats := map[uint64]int{}, 0
	var gaps int
	go func() {
		for ev := range events {
			seenMu.Lock()
			if ev.Kind == api.EventsGap {
				gaps++
			}
			if ev.Seq > start {
				seen[ev.Seq]++
				if seen[ev.Seq] > 1 {
					repeats++
				}
			}
			seenMu.Unlock()
		}
	}()

	r := &retrier{t: t, lastFail: map[int]time.Time{}, byCode: map[string]int{}}
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range faultWorkers {
		c := client(fmt.Sprintf("worker-%d", w), env.NATSURL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range faultCycles {
				var a *api.Allocation
				key := api.NewIdempotencyKey()
				r.do(ctx, w, "create", func(ctx context.Context) (err error) {
					a, err = c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, api.WithIdempotencyKey(key))
					return err
				})
				if a == nil {
					return
				}
				key = api.NewIdempotencyKey()
				r.do(ctx, w, "release", func(ctx context.Context) error {
					_, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}, api.WithIdempotencyKey(key))
					return err
				})
				// Wait for the GPU to be free again before the next one.
				for state := ""; state != api.AllocReleased && ctx.Err() == nil; {
					r.do(ctx, w, "get", func(ctx context.Context) error {
						got, err := c.AllocGet(ctx, a.ID)
						if err == nil {
							state = got.State
						}
						return err
					})
					if state != api.AllocReleased {
						// Not faster: the user's rate limit would answer.
						time.Sleep(100 * time.Millisecond)
					}
				}
				done.Add(1)
			}
		}()
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	// fail ends the test once no worker runs any more.
	fail := func(err error) {
		t.Helper()
		cancel()
		<-workersDone
		t.Fatal(err)
	}
	// The faults, from this goroutine.
	waitCycles := func(n int) {
		for done.Load() < int64(n) {
			select {
			case <-workersDone:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	type fault struct {
		name          string
		at, reconnect time.Duration // into the run; after the stop
	}
	var faults []fault
	began := time.Now()
	stop := func(i int, why string) {
		t.Logf("stopping NATS server %s (%s), %s, after %d cycles", env.NATSCluster.Name(i), env.NATSCluster.ServerURL(i), why, done.Load())
		reconnects := watcher.Conn().Stats().Reconnects
		stoppedAt := time.Now()
		env.NATSCluster.Stop(i)
		f := fault{name: why, at: stoppedAt.Sub(began)}
		for watcher.Conn().Stats().Reconnects == reconnects && time.Since(stoppedAt) < 5*time.Second {
			time.Sleep(time.Millisecond)
		}
		if watcher.Conn().Stats().Reconnects != reconnects {
			f.reconnect = time.Since(stoppedAt)
		}
		faults = append(faults, f)
	}
	waitCycles(faultWorkers * faultCycles / 3)
	stop(victim, "the watcher's")
	waitCycles(faultWorkers * faultCycles / 2)
	if err := env.NATSCluster.Restart(victim); err != nil {
		fail(err)
	}
	if err := env.NATSCluster.WaitJetStream(time.Minute); err != nil {
		fail(err)
	}
	waitCycles(2 * faultWorkers * faultCycles / 3)
	if leader, err = eventsLeader(ctx, env); err != nil {
		fail(err)
	}
	stop(leader, "the EVENTS stream leader")
	<-workersDone
	if t.Failed() {
		return
	}

	// What the stream holds for the user after start, read through
	// controld (users never read the stream themselves).
	var want []uint64
	for after, more := start, true; more; {
		var page *api.EventsSinceResponse
		r.do(ctx, -1, "events.since", func(ctx context.Context) (err error) {
			page, err = watcher.EventsSince(ctx, api.EventsSinceRequest{After: after})
			return err
		})
		if page == nil {
			return
		}
		for _, ev := range page.Events {
			want = append(want, ev.Seq)
		}
		after, more = page.Next, page.More
	}
	if len(want) < faultWorkers*faultCycles*2 {
		t.Fatalf("the stream holds %d events for the user; want at least %d (2 per cycle)", len(want), faultWorkers*faultCycles*2)
	}
	last := want[len(want)-1]
	testutil.Eventually(t, "the watcher to reach the last event", func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return seen[last] > 0
	})
	seenMu.Lock()
	defer seenMu.Unlock()
	missing := 0
	for _, seq := range want {
		if seen[seq] == 0 {
			missing++
		}
	}
	extra := 0
	wantSet := map[uint64]bool{}
	for _, seq := range want {
		wantSet[seq] = true
	}
	for seq := range seen {
		if seq <= last && !wantSet[seq] {
			extra++
		}
	}
	r.mu.Lock()
	t.Logf("requests: %d cycles (create, release, polls) by %d clients, all succeeded; failed attempts %d by code %v (each retried with its key; rate_limited is the polling, not the fault); longest client outage %s",
		faultWorkers*faultCycles, faultWorkers, r.errors.Load(), r.byCode, r.outage.Round(time.Millisecond))
	r.mu.Unlock()
	t.Logf("events: expected %d, seen %d, missing %d, not in the stream %d, repeats %d, gap warnings %d",
		len(want), len(want)-missing, missing, extra, repeats, gaps)
	for _, f := range faults {
		t.Logf("fault: %s stopped %s into the run; the watcher's connection was back %s later (0: it was not on it)",
			f.name, f.at.Round(time.Millisecond), f.reconnect.Round(time.Millisecond))
	}
	if missing != 0 || extra != 0 || repeats != 0 || gaps != 0 {
		t.Fatalf("watcher lost or repeated events: missing %d, extra %d, repeats %d, gaps %d", missing, extra, repeats, gaps)
	}
}

// eventsLeader is the index of the cluster's server that leads the
// EVENTS stream (of 3 replicas), asked as controld (users have no
// JetStream access).
func eventsLeader(ctx context.Context, env *devenv.Env) (int, error) {
	nc, err := bus.Connect(env.NATSURL, "leader-probe", bus.WithKey(env.Keys.Controld),
		nats.CustomInboxPrefix(api.ControldInboxPrefix))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, api.EventStreamName)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	if info.Config.Replicas != devenv.ClusterServers || info.Cluster == nil {
		return 0, fmt.Errorf("EVENTS has %d replicas (cluster %+v); want %d", info.Config.Replicas, info.Cluster, devenv.ClusterServers)
	}
	for i := range env.NATSCluster.Len() {
		if env.NATSCluster.Name(i) == info.Cluster.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("EVENTS leader %q is none of the cluster's servers", info.Cluster.Leader)
}
