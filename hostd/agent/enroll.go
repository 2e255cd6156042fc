package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// enrollWaitMax caps the wait between enrollment attempts while no
// controld serves enrollment.
const enrollWaitMax = 5 * time.Second

// enrollWhenAnswered sends the enrollment request until a controld answers
// it. No responders means no replica received it — controld is starting,
// restarting, or has stopped serving while it cannot reach Postgres or
// NATS (docs/decisions/0010-leases-and-fencing.md) — so the one-time token
// is not spent and sending it again is safe; a node started beside its
// control plane waits for it instead of exiting. Any answer, error or not,
// and a timeout (the request may have been applied) end the wait, as does
// ctx.
func (a *Agent) enrollWhenAnswered(ctx context.Context, c *api.Client, req hostproto.EnrollRequest) (*hostproto.EnrollResponse, error) {
	wait := 200 * time.Millisecond
	var logged time.Time
	for {
		resp, err := hostproto.Request(ctx, c, hostproto.MsgEnroll, "", req)
		if err == nil {
			return resp, nil
		}
		if !errors.Is(err, api.ErrNoResponders) || ctx.Err() != nil {
			return nil, err
		}
		if now := a.now(); now.Sub(logged) >= 30*time.Second {
			a.cfg.Log.Warn("waiting for controld to serve enrollment", "err", err)
			logged = now
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, enrollWaitMax)
	}
}
