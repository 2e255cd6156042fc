package api_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// replica stands in for a controld replica on endpoint: answer decides,
// for the n-th request it receives (from 1), whether it answers and with
// what error (nil: success). It records the requests' keys.
type replica struct {
	mu   sync.Mutex // protects keys
	keys []string
}

func (r *replica) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func serve(t *testing.T, nc *nats.Conn, endpoint string, answer func(n int) (bool, *api.Error)) *replica {
	t.Helper()
	r := &replica{}
	if _, err := nc.QueueSubscribe(api.Subject(endpoint), "q", func(m *nats.Msg) {
		r.mu.Lock()
		r.keys = append(r.keys, m.Header.Get(api.HeaderIdempotencyKey))
		n := len(r.keys)
		r.mu.Unlock()
		ok, e := answer(n)
		if !ok {
			return // took it and went silent, as a replica that died
		}
		reply := nats.NewMsg(m.Reply)
		reply.Data = []byte(`{}`)
		if e != nil {
			reply.Header.Set(micro.ErrorCodeHeader, string(e.Code))
			reply.Header.Set(micro.ErrorHeader, e.Message)
			reply.Data = e.Marshal()
		}
		_ = m.RespondMsg(reply)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRetryAfterSilentReplica: a read and a mutation taken by a replica
// that never answers are sent again after the attempt timeout and answered
// by the next try; the mutation's retry carries the same Idempotency-Key.
// Before, the call waited out its whole timeout and failed.
func TestRetryAfterSilentReplica(t *testing.T) {
	t.Parallel()
	b := testutil.PlainNATS(t)
	nc := testutil.Connect(t, b.URL)
	c := api.NewClient(nc, api.WithTimeout(30*time.Second), api.WithAttemptTimeout(300*time.Millisecond))
	firstSilent := func(n int) (bool, *api.Error) { return n > 1, nil }
	reads := serve(t, nc, api.EndpointAllocList, firstSilent)
	if _, err := c.AllocList(context.Background(), api.AllocListRequest{}); err != nil {
		t.Fatalf("read: got %v; want it answered by the retry", err)
	}
	if n := len(reads.received()); n != 2 {
		t.Errorf("read sent %d times; want 2", n)
	}
	creates := serve(t, nc, api.EndpointAllocCreate, firstSilent)
	if _, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "s", GPUs: 1},
		api.WithIdempotencyKey("k-same")); err != nil {
		t.Fatalf("mutation: got %v; want it answered by the retry", err)
	}
	if got := creates.received(); len(got) != 2 || got[0] != "k-same" || got[1] != "k-same" {
		t.Errorf("mutation sent with keys %q; want k-same twice", got)
	}
}

// TestRetryWhileSameKeyInProgress: a replica answering that the same key is
// still in progress (the first attempt runs on a replica that lost its bus
// connection) is asked again until the first finishes.
func TestRetryWhileSameKeyInProgress(t *testing.T) {
	t.Parallel()
	nc := testutil.Connect(t, testutil.PlainNATS(t).URL)
	c := api.NewClient(nc, api.WithTimeout(30*time.Second))
	inProgress := api.Errorf(api.CodeConflict, "a request with this Idempotency-Key is still in progress")
	inProgress.InProgress = true
	r := serve(t, nc, api.EndpointAllocRelease, func(n int) (bool, *api.Error) {
		if n < 3 {
			return true, inProgress
		}
		return true, nil
	})
	if _, err := c.AllocRelease(context.Background(), api.AllocReleaseRequest{ID: "a-1"}); err != nil {
		t.Fatalf("got %v; want the third attempt's reply", err)
	}
	keys := r.received()
	if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Errorf("keys %q; want one key three times", keys)
	}
	// A plain conflict (someone else changed it) is final.
	other := serve(t, nc, api.EndpointNodeDrain, func(int) (bool, *api.Error) {
		return true, api.Errorf(api.CodeConflict, "changed by someone else")
	})
	if _, err := c.NodeDrain(context.Background(), "n-1"); !errors.Is(err, api.ErrConflict) || len(other.received()) != 1 {
		t.Errorf("plain conflict: got %v after %d attempts; want conflict after 1", err, len(other.received()))
	}
}

// TestNoRespondersAfterAttemptsNamesKey: with no replica at all, a
// mutation fails after MaxAttempts attempts with an error that says so and
// names its key.
func TestNoRespondersAfterAttemptsNamesKey(t *testing.T) {
	t.Parallel()
	c := api.NewClient(testutil.Connect(t, testutil.PlainNATS(t).URL))
	_, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "s", GPUs: 1}, api.WithIdempotencyKey("k-named"))
	if !errors.Is(err, api.ErrNoResponders) {
		t.Fatalf("got %v; want no responders", err)
	}
	for _, want := range []string{"4 attempts", "Idempotency-Key k-named"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q; want it to say %q", err, want)
		}
	}
}

// TestSecretMutationNotResentAfterTimeout: a login taken by a replica that
// never answers is not sent again (its password is not re-sent blindly,
// and a replay could not return the token): one attempt, and the error
// says it may have been applied. With no responders at all it is retried:
// nobody received it.
func TestSecretMutationNotResentAfterTimeout(t *testing.T) {
	t.Parallel()
	b := testutil.PlainNATS(t)
	nc := testutil.Connect(t, b.URL)
	c := api.NewClient(nc, api.WithTimeout(2*time.Second), api.WithAttemptTimeout(300*time.Millisecond))
	if _, err := c.Login(context.Background(), api.LoginRequest{Email: "a@example.test", Password: "pw"}); !errors.Is(err, api.ErrNoResponders) ||
		!strings.Contains(err.Error(), "4 attempts") {
		t.Fatalf("no responders: got %v; want no responders after 4 attempts", err)
	}
	r := serve(t, nc, api.EndpointAuthLogin, func(int) (bool, *api.Error) { return false, nil })
	_, err := c.Login(context.Background(), api.LoginRequest{Email: "a@example.test", Password: "pw"})
	if !errors.Is(err, api.ErrTimedOut) {
		t.Fatalf("got %v; want timed out", err)
	}
	if n := len(r.received()); n != 1 {
		t.Errorf("login sent %d times; want 1", n)
	}
	var e *api.Error
	if !errors.As(err, &e) || !strings.Contains(e.Hint, "may have been applied") {
		t.Errorf("hint %q; want it to say it may have been applied", e.Hint)
	}
}

// TestTimeoutAfterAttemptsNamesKey: replicas that take a mutation and never
// answer: the call ends at its overall timeout, after several attempts, and
// the error names the attempts and the key to retry with.
func TestTimeoutAfterAttemptsNamesKey(t *testing.T) {
	t.Parallel()
	nc := testutil.Connect(t, testutil.PlainNATS(t).URL)
	c := api.NewClient(nc, api.WithTimeout(3*time.Second), api.WithAttemptTimeout(300*time.Millisecond))
	r := serve(t, nc, api.EndpointAllocRelease, func(int) (bool, *api.Error) { return false, nil })
	_, err := c.AllocRelease(context.Background(), api.AllocReleaseRequest{ID: "a-1"}, api.WithIdempotencyKey("k-t"))
	if !errors.Is(err, api.ErrTimedOut) {
		t.Fatalf("got %v; want timed out", err)
	}
	n := len(r.received())
	if n < 2 {
		t.Errorf("sent %d times; want retries within the timeout", n)
	}
	var e *api.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "attempts") || !strings.Contains(e.Message, "k-t") ||
		!strings.Contains(e.Hint, "k-t") {
		t.Errorf("got %q (hint %q); want the attempts and the key named", e.Message, e.Hint)
	}
}

// TestReadWithLostReplyUnderLongDeadlineIsRetried is the regression test of
// `alloc wait` hanging for its whole --timeout: its re-read of the
// allocation, sent just as the connection was cut, lost its reply, and the
// call waited for the wait's own deadline (a minute) instead of an
// attempt's (cli/alloc TestWaitSeesChangeMadeWhileDisconnected failed 1 in
// 6 runs under load). A caller's long deadline bounds the call, not one
// attempt.
func TestReadWithLostReplyUnderLongDeadlineIsRetried(t *testing.T) {
	t.Parallel()
	nc := testutil.Connect(t, testutil.PlainNATS(t).URL)
	c := api.NewClient(nc, api.WithAttemptTimeout(300*time.Millisecond))
	reads := serve(t, nc, api.EndpointAllocGet, func(n int) (bool, *api.Error) { return n > 1, nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c.AllocGet(ctx, "a-1"); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read: got %v; want it answered by the second attempt", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read waited for the caller's deadline, not an attempt's")
	}
	if n := len(reads.received()); n != 2 {
		t.Errorf("read sent %d times; want 2", n)
	}
}

// TestSecretMutationWaitsPastTheAttemptTimeout is the regression test of
// logins failing under load after one 4 s attempt ("timed out waiting for
// controld (auth.login); 1 attempt" in e2e TestOpenSSHThroughGateway): a
// call that is never sent again after a timeout must not give up at the
// attempt timeout, only at the call's.
func TestSecretMutationWaitsPastTheAttemptTimeout(t *testing.T) {
	t.Parallel()
	nc := testutil.Connect(t, testutil.PlainNATS(t).URL)
	var sent atomic.Int64
	if _, err := nc.Subscribe(api.Subject(api.EndpointAuthLogin), func(m *nats.Msg) {
		sent.Add(1)
		time.Sleep(900 * time.Millisecond) // a slow bcrypt on a busy machine
		_ = m.Respond([]byte(`{"token":"t"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(nc, api.WithTimeout(30*time.Second), api.WithAttemptTimeout(300*time.Millisecond))
	if _, err := c.Login(context.Background(), api.LoginRequest{Email: "a@example.test", Password: "pw"}); err != nil {
		t.Fatalf("login: %v; want the reply that came after the attempt timeout", err)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("login sent %d times; want 1", n)
	}
}

// TestInProgressCutByDeadlineStaysInProgress is the regression test of
// controld's TestIdempotencyInFlightDuplicateConflicts failing in .ci/run
// (and hanging it): a duplicate whose every answer was "still in
// progress" ended as a timeout ("it may have been applied") when the
// call's deadline cut the last attempt short, under load. It ends with
// the in-progress conflict it was told.
func TestInProgressCutByDeadlineStaysInProgress(t *testing.T) {
	t.Parallel()
	nc := testutil.Connect(t, testutil.PlainNATS(t).URL)
	c := api.NewClient(nc, api.WithTimeout(2*time.Second))
	inProgress := api.Errorf(api.CodeConflict, "a request with this Idempotency-Key is still in progress")
	inProgress.InProgress = true
	r := serve(t, nc, api.EndpointAllocCreate, func(n int) (bool, *api.Error) {
		if n < 3 {
			return true, inProgress
		}
		time.Sleep(3 * time.Second) // answers only after the call's deadline
		return true, inProgress
	})
	_, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "s", GPUs: 1}, api.WithIdempotencyKey("k-busy"))
	var e *api.Error
	if !errors.Is(err, api.ErrConflict) || !errors.As(err, &e) || !e.InProgress {
		t.Fatalf("got %v; want the in-progress conflict", err)
	}
	if n := len(r.received()); n < 3 {
		t.Errorf("attempts: got %d; want at least 3 (the third cut by the deadline)", n)
	}
}
