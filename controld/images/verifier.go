package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Outcome is what became of a claimed verification once it ran.
type Outcome string

const (
	// Recorded: the check's result is the image's trust now.
	Recorded Outcome = "recorded"
	// Dropped: the image was revoked or retired while it waited; nothing
	// about its trust changed.
	Dropped Outcome = "dropped"
)

// VerifierConfig is what a Verifier needs.
type VerifierConfig struct {
	Pool *pgxpool.Pool
	// Check fetches ref by digest from the registry and checks it
	// (internal/registry's Verify): an error means the attempt could not
	// run (the registry unreachable), not that the image failed.
	Check func(ctx context.Context, ref string) (Check, error)
	// Record writes the audit row and the event of a finished
	// verification in tx: before and after are the image's rows, c the
	// request (its asker is the audit row's actor).
	Record func(ctx context.Context, tx pgx.Tx, before, after api.Image, c Claim, o Outcome) error
	Now    func() time.Time
	Log    *slog.Logger
	// Timeout bounds one attempt (a multi-GB image is read whole): 30 min
	// by default. The claim's lease is a minute longer.
	Timeout time.Duration
	// Parallel is how many verifications a replica runs at once (2).
	Parallel int
	// RetryMin and RetryMax bound the backoff between attempts a registry
	// error deferred: 10 s doubling to 10 min.
	RetryMin, RetryMax time.Duration
	// Poll is the longest wait between looks at the queue when no
	// notification arrives (a lost LISTEN connection, a due retry): 30 s.
	Poll time.Duration
}

// CheckAndSetDefaults validates c and fills in defaults.
func (c *VerifierConfig) CheckAndSetDefaults() error {
	if c.Pool == nil || c.Check == nil || c.Record == nil {
		return errors.New("image verifier: Pool, Check and Record are required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Minute
	}
	if c.Parallel <= 0 {
		c.Parallel = 2
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 10 * time.Second
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(10*time.Minute, c.RetryMin)
	}
	if c.Poll <= 0 {
		c.Poll = 30 * time.Second
	}
	return nil
}

// Verifier runs queued verifications (RequestVerify): every controld
// replica runs one; a claim (FOR UPDATE SKIP LOCKED, then a lease) keeps
// two replicas off the same request, and a replica that dies mid-attempt
// leaves it to be taken again when its lease ends. Nothing is lost: a
// request stays queued until its result is recorded.
type Verifier struct {
	cfg  VerifierConfig
	wake chan struct{}
}

// NewVerifier returns a Verifier of cfg.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Verifier{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Run takes and runs verifications until ctx ends; attempts under way
// when it ends are put back, due at once.
func (v *Verifier) Run(ctx context.Context) error {
	l := &store.Listener{Name: "image verifier", Pool: v.cfg.Pool, Channel: VerifyChannel, Log: v.cfg.Log}
	defer l.Close(ctx)
	slots := make(chan struct{}, v.cfg.Parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		l.Ensure(ctx)
		for ctx.Err() == nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			now := v.cfg.Now()
			c, ok, err := ClaimVerify(ctx, v.cfg.Pool, now, now.Add(v.cfg.Timeout+time.Minute))
			if err != nil || !ok {
				<-slots
				if err != nil && ctx.Err() == nil {
					v.cfg.Log.Warn("image verifier", "err", err)
				}
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots; v.kick() }()
				v.attempt(ctx, c)
			}()
		}
		wait := v.cfg.Poll
		if due, ok, err := NextVerifyDue(ctx, v.cfg.Pool); err == nil && ok {
			wait = min(max(due.Sub(v.cfg.Now()), 10*time.Millisecond), wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-l.Notified():
		case <-v.wake:
		}
		t.Stop()
	}
}

func (v *Verifier) kick() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// attempt runs the claimed verification c and records its outcome, or
// defers it when the registry could not be read.
func (v *Verifier) attempt(ctx context.Context, c Claim) {
	log := v.cfg.Log.With("image", c.ImageID, "ref", c.Ref, "attempt", c.Attempt)
	actx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	chk, err := v.cfg.Check(actx, c.Ref)
	cancel()
	// The outcome is written even while ctx ends (a shutdown), briefly.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	if err != nil {
		due, reason := v.cfg.Now().Add(v.backoff(c.Attempt)), err.Error()
		if ctx.Err() != nil {
			due, reason = v.cfg.Now(), "controld stopped during the attempt"
		}
		log.Warn("image verification deferred", "next", due, "err", err)
		if derr := DeferVerify(wctx, v.cfg.Pool, c, api.SanitizeText(reason), due); derr != nil {
			log.Warn("image verifier", "err", derr)
		}
		return
	}
	if err := v.record(wctx, c, chk); err != nil {
		log.Warn("image verifier: recording failed; the request is taken again when its lease ends", "err", err)
		return
	}
	log.Info("image verified", "ok", chk.OK, "reason", chk.Reason)
}

// record writes chk as the outcome of c, in one transaction with its
// audit row and event; an image revoked or retired meanwhile keeps its
// trust and the request is dropped.
func (v *Verifier) record(ctx context.Context, c Claim, chk Check) error {
	return pgx.BeginFunc(ctx, v.cfg.Pool, func(tx pgx.Tx) error {
		before, pending, err := LockPending(ctx, tx, c)
		if err != nil || !pending {
			return err
		}
		now := v.cfg.Now()
		outcome := Recorded
		var after api.Image
		// Who asked was allowed when they asked; only the image's states
		// may have changed since (Decide's rules for a verify).
		if before.Trust == api.TrustRevoked || before.Lifecycle == api.ImageRetired {
			outcome = Dropped
			after, err = DropVerify(ctx, tx, c.ImageID, now)
		} else {
			after, err = RecordCheck(ctx, tx, c.ImageID, chk, now)
		}
		if err != nil {
			return err
		}
		if err := v.cfg.Record(ctx, tx, before, after, c, outcome); err != nil {
			return fmt.Errorf("record verification of image %s: %w", c.ImageID, err)
		}
		return nil
	})
}

// backoff is the wait before attempt n+1 after attempt n failed to run.
func (v *Verifier) backoff(n int) time.Duration {
	d := v.cfg.RetryMin
	for i := 1; i < n && d < v.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, v.cfg.RetryMax)
}
