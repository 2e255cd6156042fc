package images_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// records counts what a verifier recorded, by image.
type records struct {
	mu       sync.Mutex
	outcomes map[string][]images.Outcome
	checks   map[string]int
}

func newRecords() *records {
	return &records{outcomes: map[string][]images.Outcome{}, checks: map[string]int{}}
}

func (r *records) record(_ context.Context, _ pgx.Tx, _, after api.Image, _ images.Claim, o images.Outcome) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[after.ID] = append(r.outcomes[after.ID], o)
	return nil
}

func (r *records) of(id string) ([]images.Outcome, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]images.Outcome(nil), r.outcomes[id]...), r.checks[id]
}

// runVerifier runs a verifier checking against the real registry client
// (counting its checks by reference) until the test ends.
func runVerifier(t *testing.T, pool *pgxpool.Pool, rec *records, refs map[string]string) {
	t.Helper()
	client, err := registry.New(registry.Settings{Addr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := images.NewVerifier(images.VerifierConfig{Pool: pool, Record: rec.record,
		RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, Poll: 100 * time.Millisecond,
		Check: func(ctx context.Context, ref string) (images.Check, error) {
			rec.mu.Lock()
			rec.checks[refs[ref]]++
			rec.mu.Unlock()
			c, err := client.Verify(ctx, ref)
			return images.Check(c), err
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("verifier: %v", err)
		}
	})
}

// serveRegistry starts an in-process registry on loopback for the test.
func serveRegistry(t *testing.T) *registry.Server {
	t.Helper()
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// queued publishes a one-layer image under repository addr/name (not
// pushed) and queues its verification.
func queued(t *testing.T, pool *pgxpool.Pool, addr, name string) (api.Image, *registry.Client, func()) {
	t.Helper()
	img, err := registry.Tiny(map[string]string{"bin/" + name: name})
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := images.Publish(t.Context(), pool, images.New{Name: name, Repository: addr + "/" + name, Digest: d.String(), By: "u-1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.RequestVerify(t.Context(), pool, pub.ID, "u-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	client, err := registry.New(registry.Settings{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	push := func() {
		if _, err := client.Push(t.Context(), name, img); err != nil {
			t.Fatal(err)
		}
	}
	return pub, client, push
}

// waitFor polls the image id until done holds.
func waitFor(t *testing.T, pool *pgxpool.Pool, id string, done func(api.Image) bool) api.Image {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		img, err := images.Find(t.Context(), pool, id, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if done(img) {
			return img
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s: still %+v, verification %+v", id, img, img.Verification)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestVerifierRetriesUntilTheRegistryAnswers: a registry that cannot be
// reached defers the verification with its error, visible on the image,
// and the trust unchanged; once the registry serves the image the next
// attempt records the result, once.
func TestVerifierRetriesUntilTheRegistryAnswers(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	addr := freeAddr(t)
	img, _, _ := queued(t, pool, addr, "late")
	// The registry holding the image listens elsewhere; addr, where the
	// image's reference points, refuses connections until it forwards
	// there (the registry coming back with the image already in it).
	srv := serveRegistry(t)
	pushTo(t, srv.Addr(), "late")
	rec := newRecords()
	runVerifier(t, pool, rec, map[string]string{img.Ref: img.ID})
	deferred := waitFor(t, pool, img.ID, func(i api.Image) bool {
		return i.Verification != nil && i.Verification.LastError != "" && i.Verification.Attempts >= 2
	})
	if deferred.Trust != api.TrustUnverified || deferred.VerifiedAt != nil {
		t.Fatalf("deferred: %+v", deferred)
	}
	if out, _ := rec.of(img.ID); len(out) != 0 {
		t.Fatalf("recorded %v while the registry was down", out)
	}
	forward(t, addr, srv.Addr())
	done := waitFor(t, pool, img.ID, func(i api.Image) bool { return i.Verification == nil })
	if done.Trust != api.TrustVerified || done.Layers != 1 || done.Platform != api.ImagePlatform {
		t.Fatalf("after the registry came back: %+v", done)
	}
	if out, _ := rec.of(img.ID); len(out) != 1 || out[0] != images.Recorded {
		t.Fatalf("outcomes: %v; want one recorded", out)
	}
}

// pushTo pushes queued's image of name to the registry at addr.
func pushTo(t *testing.T, addr, name string) {
	t.Helper()
	img, err := registry.Tiny(map[string]string{"bin/" + name: name})
	if err != nil {
		t.Fatal(err)
	}
	client, err := registry.New(registry.Settings{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Push(t.Context(), name, img); err != nil {
		t.Fatal(err)
	}
}

// forward listens on addr and relays each connection to target.
func forward(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
}

// TestVerifiersCheckEachRequestOnce: two verifiers (two replicas) share
// the queue; each request is checked and recorded once.
func TestVerifiersCheckEachRequestOnce(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	srv := serveRegistry(t)
	rec := newRecords()
	refs := map[string]string{}
	var all []api.Image
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		img, _, push := queued(t, pool, srv.Addr(), name)
		push()
		refs[img.Ref] = img.ID
		all = append(all, img)
	}
	runVerifier(t, pool, rec, refs)
	runVerifier(t, pool, rec, refs)
	for _, img := range all {
		waitFor(t, pool, img.ID, func(i api.Image) bool { return i.Verification == nil })
	}
	for _, img := range all {
		if out, checks := rec.of(img.ID); len(out) != 1 || checks != 1 {
			t.Errorf("image %s: outcomes %v, %d checks; want one of each", img.Name, out, checks)
		}
	}
}

// TestVerifierRetakesAnAbandonedClaim: a claim whose verifier died is
// taken again when its lease ends.
func TestVerifierRetakesAnAbandonedClaim(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	srv := serveRegistry(t)
	img, _, push := queued(t, pool, srv.Addr(), "orphan")
	push()
	now := time.Now()
	if _, ok, err := images.ClaimVerify(t.Context(), pool, now, now.Add(300*time.Millisecond)); err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if _, ok, err := images.ClaimVerify(t.Context(), pool, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("a second claim of a leased request: %v, %v; want none", ok, err)
	}
	rec := newRecords()
	runVerifier(t, pool, rec, map[string]string{img.Ref: img.ID})
	done := waitFor(t, pool, img.ID, func(i api.Image) bool { return i.Verification == nil })
	if done.Trust != api.TrustVerified {
		t.Fatalf("after the lease: %+v", done)
	}
}

// TestVerifierDropsARevokedImage: an image revoked while its verification
// waited keeps its revoked trust; the request ends without a result.
func TestVerifierDropsARevokedImage(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	srv := serveRegistry(t)
	img, _, push := queued(t, pool, srv.Addr(), "gone")
	push()
	m, err := images.Decide(img, images.ActRevoke, images.Actor{PlatformRole: api.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.Apply(t.Context(), pool, img.ID, m, "CVE", time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := newRecords()
	runVerifier(t, pool, rec, map[string]string{img.Ref: img.ID})
	done := waitFor(t, pool, img.ID, func(i api.Image) bool { return i.Verification == nil })
	if done.Trust != api.TrustRevoked || done.TrustReason != "CVE" || done.VerifiedAt != nil {
		t.Fatalf("after the verifier: %+v", done)
	}
	if out, _ := rec.of(img.ID); len(out) != 1 || out[0] != images.Dropped {
		t.Fatalf("outcomes: %v; want one dropped", out)
	}
}

// TestRequestVerifyKeepsAPendingRequest: asking again while a request is
// pending changes nothing.
func TestRequestVerifyKeepsAPendingRequest(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	img, _, _ := queued(t, pool, "127.0.0.1:1", "twice")
	first, err := images.Find(t.Context(), pool, img.ID, "", false)
	if err != nil || first.Verification == nil {
		t.Fatalf("queued: %+v, %v", first, err)
	}
	again, err := images.RequestVerify(t.Context(), pool, img.ID, "u-1", time.Now().Add(time.Hour))
	if err != nil || again.Verification == nil || !again.Verification.RequestedAt.Equal(first.Verification.RequestedAt) {
		t.Fatalf("asked again: %+v, %v; want the first request kept", again.Verification, err)
	}
}
