package hosts

import (
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Reasons replyRefused gives (controld's gpuaas_api_replies_refused_total).
const (
	// RefusedNotNode is a node report whose reply is not its node's inbox.
	RefusedNotNode = "not_nodes_inbox"
	// RefusedEnrollProof is an enrollment whose reply is not the inbox of
	// a key it proves.
	RefusedEnrollProof = "bad_proof"
)

// replyRefused says why a report or an enrollment must be dropped
// unanswered and unexecuted, or "" to take it. A reply subject is the
// sender's choice, and answering it as given would let a node, or anyone
// enrolling, make controld publish anywhere (api/replyproof.go): a report's
// reply must be in the inbox of the node its subject names (only that node
// may publish there), an enrollment's in the inbox of the key whose proof
// it carries. A report sent without a reply is taken; it is answered to no
// one.
func replyRefused(m *nats.Msg) string {
	if m.Subject == hostproto.SubjectEnroll {
		owner, ok := api.InboxOwner(m.Reply)
		if !ok || !api.VerifyReplyProof(owner, m.Header.Get(api.HeaderReplyProof)) {
			return RefusedEnrollProof
		}
		return ""
	}
	if m.Reply == "" {
		return ""
	}
	if owner, ok := api.InboxOwner(m.Reply); !ok || owner != nodeOf(m.Subject) {
		return RefusedNotNode
	}
	return ""
}
