package term

import (
	"context"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/env"
)

// A slice's workload runs in its guest (docs/apps.md, "Slices"): the
// sessions of ssh <workload-id>@gateway are not relayed to the guest's
// sshd as its allocation's are, but run through the environment's exec
// (the hop) as `podman exec` in the container, as the guest's user, the
// same as on bare metal. Loopback dials (ssh -L) reach the guest's
// loopback (the containers share the guest's network). A remote forward
// (ssh -R) would listen on the node, not in the guest: refused.

// guestWorkloadTarget serves a workload ticket of a slice: env e is the
// guest (an env.Hopper with no account on the node).
func (s *Server) guestWorkloadTarget(ctx context.Context, c *conn, sc gossh.Conn, e env.Environment, user, workloadID string) (target, error) {
	x := &execTarget{s: s, c: c, env: e, acct: Account{Name: user}, ctx: ctx, sc: sc}
	t, err := workloadTarget(x, workloadID)
	if err != nil {
		return nil, err
	}
	return guestWorkload{t.(*execTarget)}, nil
}

// guestWorkload is a guest workload's target: its exec target without
// remote forwards.
type guestWorkload struct{ *execTarget }

func (guestWorkload) forward([]byte) (bool, []byte) { return false, nil }

func (guestWorkload) cancelForward([]byte) bool { return false }
