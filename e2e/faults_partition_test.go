package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestFaultPartitions is the partition suite: gpuaas with every process
// in its own network namespace (partitionCluster), under load (clients
// creating and releasing allocations, each retried with its idempotency
// key, and a watcher following the user's events), through four silent
// faults in turn, each healed before the next:
//
//  1. nats-1, where both controld replicas' connections are, is cut off
//     from the two other servers (the clients' and hosts');
//  2. the replica holding the outbox relay is cut off from Postgres;
//  3. the relay's holder is cut off from every NATS server;
//  4. the relay's holder is paused (SIGSTOP), then resumed.
//
// During each fault the API answers every request again (the cut replica
// left the queue group, or controld moved off the cut server) and an
// event committed after the fault began is published (the relay failed
// over); no healthy node is marked down. Afterwards: every create made
// one allocation, no slot is held twice or by an allocation that ended,
// the ledger verifies, and the watcher saw every event of the user once.
// The log has each fault's recovery times.
func TestFaultPartitions(t *testing.T) {
	c := startPartitionCluster(t)
	admin := c.client(0)
	c.startHosts(admin)
	db, err := pgx.Connect(t.Context(), c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())

	w := startPartitionLoad(t, c)
	var nodesDown atomic.Value // the first node seen down, and when
	stopWatch := watchNodesDown(t, c.dsn, &nodesDown)
	c.waitFor("load before the faults", func() bool { return w.cycles.Load() >= 4 })

	faults := []struct {
		name string
		cut  time.Duration
		do   func() (heal func())
	}{
		{"nats-1 (both controld's server) cut off from nats-2 and nats-3", 30 * time.Second, func() func() {
			others := []string{"nats-2", "nats-3"}
			c.net.setCut(true, []string{"nats-1"}, others)
			return func() { c.net.setCut(false, []string{"nats-1"}, others) }
		}},
		{"the relay's holder cut off from Postgres", 20 * time.Second, func() func() {
			h := c.relayHolderName(db)
			c.net.setCut(true, []string{h}, []string{"pg"})
			return func() { c.net.setCut(false, []string{h}, []string{"pg"}) }
		}},
		{"the relay's holder cut off from every NATS server", 20 * time.Second, func() func() {
			h := c.relayHolderName(db)
			all := []string{"nats-1", "nats-2", "nats-3"}
			c.net.setCut(true, []string{h}, all)
			return func() { c.net.setCut(false, []string{h}, all) }
		}},
		{"the relay's holder paused (SIGSTOP)", 20 * time.Second, func() func() {
			p := c.controld[c.relayHolderIndex(db)]
			if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			return func() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT) }
		}},
	}
	probe := c.client(2 * time.Second)
	for i, f := range faults {
		start := time.Now()
		heal := f.do()
		marker := fmt.Sprintf("partition-%d", i)
		var id int64
		if err := db.QueryRow(t.Context(), `INSERT INTO outbox_events (kind, subject, payload, created_at, next_attempt_at)
			VALUES ($1, $2, '{}', now(), now()) RETURNING id`, api.EventNode, marker).Scan(&id); err != nil {
			t.Fatal(err)
		}
		apiBack, relayBack := c.duringCut(f.cut, start, probe, db, id)
		heal()
		healed := time.Now()
		c.waitFor("both replicas ready after the heal", func() bool {
			return c.get(c.controld[0].metrics+"/readyz") == 200 && c.get(c.controld[1].metrics+"/readyz") == 200
		})
		t.Logf("fault %d, %s (%v): API answering everything after %s, an event committed during it published after %s; both replicas ready %v after the heal",
			i+1, f.name, f.cut, describeRecovery(apiBack), describeRecovery(relayBack), time.Since(healed).Round(time.Millisecond))
		if apiBack < 0 {
			t.Errorf("fault %d (%s): the API did not answer every request within the %v of the cut", i+1, f.name, f.cut)
		}
		if relayBack < 0 {
			t.Errorf("fault %d (%s): the event committed during the cut was not published within it", i+1, f.name)
		}
	}
	stopWatch()
	if d, ok := nodesDown.Load().(string); ok {
		t.Errorf("a heartbeating node was marked down: %s", d)
	}
	w.stop()
	if t.Failed() {
		return
	}
	c.checkInvariants(db, admin, w)
}

// describeRecovery is a recovery time, or "never" (negative).
func describeRecovery(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

// duringCut watches the cut for its duration (from start): when the API
// first answered five requests in a row, each within the probe's short
// timeout (retries included), and when the outbox row id was published; -1
// for what did not happen within it.
func (c *partitionCluster) duringCut(cut time.Duration, start time.Time, probe *api.Client, db *pgx.Conn, id int64) (apiBack, relayBack time.Duration) {
	apiBack, relayBack = -1, -1
	streak, failed := 0, 0
	var lastErr error
	defer func() {
		if apiBack < 0 {
			c.t.Logf("the probe failed %d times; last: %v (on %s)", failed, lastErr, probe.Conn().ConnectedUrl())
		}
	}()
	for time.Since(start) < cut {
		if apiBack < 0 {
			if _, err := probe.CatalogList(c.t.Context()); err == nil {
				if streak++; streak == 5 {
					apiBack = time.Since(start)
				}
			} else {
				streak, lastErr = 0, err
				failed++
			}
		}
		if relayBack < 0 {
			var state string
			if err := db.QueryRow(c.t.Context(), `SELECT state FROM outbox_events WHERE id = $1`, id).Scan(&state); err == nil &&
				state == api.OutboxPublished {
				relayBack = time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond) // a sampling period through the cut, not a wait for readiness
	}
	return apiBack, relayBack
}

// relayHolderIndex is the index in c.controld of the replica holding the
// outbox relay's lease (its holder names the process id).
func (c *partitionCluster) relayHolderIndex(db *pgx.Conn) int {
	c.t.Helper()
	idx := -1
	c.waitFor("a relay holder", func() bool {
		var holder string
		if err := db.QueryRow(c.t.Context(), `SELECT holder FROM leases WHERE name = 'outbox.relay' AND expires_at > clock_timestamp()`).
			Scan(&holder); err != nil {
			return false
		}
		parts := strings.Split(holder, "/")
		if len(parts) != 3 {
			return false
		}
		pid, _ := strconv.Atoi(parts[1])
		for i, p := range c.controld {
			if p.cmd.Process.Pid == pid {
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

func (c *partitionCluster) relayHolderName(db *pgx.Conn) string {
	return fmt.Sprintf("controld-%d", c.relayHolderIndex(db)+1)
}

// watchNodesDown samples the nodes' states until stopped and stores the
// first node seen down in first.
func watchNodesDown(t *testing.T, dsn string, first *atomic.Value) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("watch nodes: %v", err)
			return
		}
		defer db.Close(context.Background())
		for ctx.Err() == nil {
			var name string
			err := db.QueryRow(ctx, `SELECT name FROM nodes WHERE state = 'down' LIMIT 1`).Scan(&name)
			if err == nil && first.Load() == nil {
				first.Store(fmt.Sprintf("%s at %s", name, time.Now().Format(time.RFC3339Nano)))
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond): // sampling period
			}
		}
	}()
	return func() { cancel(); <-done }
}

// partitionLoad is the clients' load: workers creating and releasing
// allocations, each call retried with its key until it succeeds, and a
// watcher of the user's events.
type partitionLoad struct {
	t      *testing.T
	cycles atomic.Int64
	errs   errorKinds
	halt   atomic.Bool
	wg     sync.WaitGroup
	// mu protects keys (create key → allocation), seen (event
	// sequence → times the watcher saw it) and copies (the ids and kinds
	// of what it saw under a sequence, to tell a repeat's cause).
	mu      sync.Mutex
	keys    map[string]string
	seen    map[uint64]int
	copies  map[uint64][]string
	refills []string
	from    uint64 // the stream position before the load
	watcher *api.Client
	cancel  context.CancelFunc
}

func startPartitionLoad(t *testing.T, c *partitionCluster) *partitionLoad {
	w := &partitionLoad{t: t, keys: map[string]string{}, seen: map[uint64]int{}, copies: map[uint64][]string{}, watcher: c.client(0)}
	who, err := w.watcher.Whoami(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pos, err := w.watcher.EventsSince(t.Context(), api.EventsSinceRequest{Tail: true})
	if err != nil {
		t.Fatal(err)
	}
	w.from = pos.Next
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	events, err := w.watcher.SubscribeEvents(ctx, who.User.ID, api.OnRefill(func(r api.EventsRefill) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.refills = append(w.refills, fmt.Sprintf("%s after %d: %d at %s", r.Cause, r.After, r.Events, time.Now().Format("15:04:05.000")))
	}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range events {
			if ev.Seq != 0 {
				w.mu.Lock()
				w.seen[ev.Seq]++
				w.copies[ev.Seq] = append(w.copies[ev.Seq], fmt.Sprintf("id %d %s prev %d at %s", ev.ID, ev.Kind, ev.Prev, time.Now().Format("15:04:05.000")))
				w.mu.Unlock()
			}
		}
	}()
	for n := range 3 {
		cl := c.client(0)
		w.wg.Go(func() {
			for i := 0; !w.halt.Load(); i++ {
				key := fmt.Sprintf("partition-%d-%d", n, i)
				var a *api.Allocation
				if !w.retry(func(ctx context.Context) (err error) {
					a, err = cl.AllocCreate(ctx, api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1}, api.WithIdempotencyKey(key))
					return err
				}) {
					return
				}
				w.mu.Lock()
				w.keys[key] = a.ID
				w.mu.Unlock()
				if !w.retry(func(ctx context.Context) error {
					_, err := cl.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}, api.WithIdempotencyKey(key+"-r"))
					return err
				}) {
					return
				}
				w.cycles.Add(1)
			}
		})
	}
	t.Cleanup(func() { w.stop(); w.cancel() })
	return w
}

// retry runs f until it succeeds, counting what the client saw; false
// when it gave up (the test failed).
func (w *partitionLoad) retry(f func(ctx context.Context) error) bool {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return true
		}
		w.errs.add(err)
		var e *api.Error
		if errors.As(err, &e) && e.Code != api.CodeUnavailable && e.Code != api.CodeConflict && e.Code != api.CodeNoCapacity {
			w.t.Errorf("call failed for good: %v", err)
			return false
		}
		if time.Now().After(deadline) {
			w.t.Errorf("call still failing after 2m: %v", err)
			return false
		}
		time.Sleep(200 * time.Millisecond) // the client's own retry pace
	}
}

// stop ends the workers; the watcher follows the events until the test
// ends.
func (w *partitionLoad) stop() {
	w.halt.Store(true)
	w.wg.Wait()
}

// checkInvariants checks, after the faults: every create made one
// allocation; no slot is held twice or by an allocation that ended; the
// outbox drained; the ledger verifies; the watcher saw every event of the
// user the stream holds, once.
func (c *partitionCluster) checkInvariants(db *pgx.Conn, admin *api.Client, w *partitionLoad) {
	t := c.t
	w.mu.Lock()
	ids := map[string]bool{}
	for _, id := range w.keys {
		ids[id] = true
	}
	creates := len(w.keys)
	w.mu.Unlock()
	var allocations int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM allocations`).Scan(&allocations); err != nil {
		t.Fatal(err)
	}
	if len(ids) != creates || allocations != creates {
		t.Errorf("%d create keys answered with %d distinct allocations, %d in the database; want each once", creates, len(ids), allocations)
	}
	var badSlots int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM allocations a WHERE
		(SELECT count(*) FROM slots s WHERE s.allocation_id = a.id) <>
		CASE WHEN a.state IN ('provisioning', 'active', 'releasing', 'release_failed') THEN a.gpus ELSE 0 END`).Scan(&badSlots); err != nil {
		t.Fatal(err)
	}
	if badSlots != 0 {
		t.Errorf("%d allocations hold other slots than their GPUs (a slot booked twice, or kept after the end)", badSlots)
	}
	var pending int
	c.waitFor("the outbox drained", func() bool {
		return db.QueryRow(t.Context(), `SELECT count(*) FROM outbox_events WHERE state <> 'published'`).Scan(&pending) == nil && pending == 0
	})
	verify := strings.TrimSpace(c.clientCLI("", "ops", "ledger", "verify"))
	var want []uint64
	c.waitFor("the watcher to see the user's events", func() bool {
		held, err := userEvents(t.Context(), admin, w.from)
		if err != nil || len(held) == 0 {
			return false
		}
		want = held
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.seen[held[len(held)-1]] > 0
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	var missing []uint64
	repeats := 0
	for _, seq := range want {
		if w.seen[seq] == 0 {
			missing = append(missing, seq)
		}
		if w.seen[seq] > 1 {
			if repeats++; repeats <= 5 {
				t.Logf("seq %d seen %d times: %s", seq, w.seen[seq], strings.Join(w.copies[seq], "; "))
			}
		}
	}
	t.Logf("load: %d create+release cycles, %d creates → %d allocations; client-visible errors (retried) %s", w.cycles.Load(), creates, len(ids), w.errs.String())
	t.Logf("ledger verify: %s; events: %d expected, %d missing, %d repeats", verify, len(want), len(missing), repeats)
	if len(missing) != 0 || repeats != 0 {
		t.Logf("the watcher's read-backs: %s", strings.Join(w.refills, "; "))
		t.Errorf("the watcher missed events %v and saw %d twice; want every event once", missing, repeats)
	}
}
