package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Terminal is the node's terminal server (hostd/term.Server) as the agent
// drives it: it learns which node it serves once the agent knows its
// identity, and the ticket CA keys controld trusts, fetched at start and
// every CAsInterval so a CA rotation reaches it.
type Terminal interface {
	SetNode(id, shape string)
	SetTrusted(keys []gossh.PublicKey)
}

// casLoop keeps the terminal's trusted ticket CA keys current: at start
// (retrying with backoff until controld answers) and then every
// CAsInterval. When controld cannot be reached the last keys stay.
func (a *Agent) casLoop(ctx context.Context) {
	const first = 100 * time.Millisecond
	backoff := first
	for {
		wait := a.cfg.CAsInterval
		if err := a.fetchCAs(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.cfg.Log.Warn("ticket CA keys not refreshed", "err", err)
			wait, backoff = min(backoff, wait), min(backoff*2, wait)
		} else {
			backoff = first
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// fetchCAs asks controld for the internal CA's keys (signed like a pull
// request) and hands them to the terminal.
func (a *Agent) fetchCAs(ctx context.Context) error {
	req := hostproto.PullRequest{NodeID: a.id.NodeID, At: a.now()}
	env, err := sealReport(a, hostproto.MsgCAs, &req.ReportStamp, &req)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := hostproto.RequestSealed(rctx, a.client, hostproto.MsgCAs, a.id.NodeID, env)
	if err != nil {
		return fmt.Errorf("ticket CA keys: %w", err)
	}
	keys, err := sshcert.ParseTrusted([]byte(strings.Join(resp.Internal, "\n")))
	if err != nil {
		return fmt.Errorf("ticket CA keys: %w", err)
	}
	a.cfg.Terminal.SetTrusted(keys)
	return nil
}
