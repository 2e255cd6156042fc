package sshgate

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/ssh"

	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// isWorkloadUser reports whether an SSH user name is meant as a workload
// (ssh <workload-id>@gateway, docs/apps.md).
func isWorkloadUser(user string) bool {
	return strings.HasPrefix(user, ids.Workload+"-")
}

// workloadSession serves a session of a workload connection as an
// allocation's (proxySession): the core asks controld for the workload,
// controld answers with its allocation (whose rules, activity, recording
// and revocation apply) and a ticket naming the workload, and the node
// runs the session in the workload's container as the allocation's user.
// The name is the client's choice: only the form is checked here, the
// rest is controld's (an unknown workload and another project's get the
// same refusal there).
func (g *Gateway) workloadSession(s ssh.Session, id sshcert.Identity, user string) {
	if !ids.Valid(ids.Workload, user) {
		fail(s, fmt.Errorf("%q is not a workload id: ssh <workload-id>@gateway enters a running workload (see `gpuaas app ps`)", truncate(user, 64)))
		return
	}
	g.proxySession(s, id)
}
