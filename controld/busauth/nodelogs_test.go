package busauth_test

import (
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestNodeLogsSubjectPermissions: a node's logs subject is reached only
// through controld's node.logs: no user connection (an operator's
// neither), gateway or other node may ask the node for its logs directly,
// nor listen in to answer in its place (that the node itself may
// subscribe and answer: hostd/agent TestNodeLogs).
func TestNodeLogsSubjectPermissions(t *testing.T) {
	t.Parallel()
	checkOnlyControldReachesNode(t, hostproto.MsgLogs.SubjectOf, []byte(`{}`))
}

// TestNodeTopSubjectPermissions: a node's GPU telemetry subject is reached
// only through controld's alloc.top: no user connection (an operator's
// neither), gateway or other node may ask the node directly (and so learn
// of GPUs not theirs), nor listen in to answer in its place (that the node
// itself may subscribe and answer: hostd/agent TestAllocTop).
func TestNodeTopSubjectPermissions(t *testing.T) {
	t.Parallel()
	checkOnlyControldReachesNode(t, hostproto.MsgTop.SubjectOf, []byte(`{"pcis":["0000:18:00.0"]}`))
}

// checkOnlyControldReachesNode enrolls two nodes and checks that a user,
// an operator's user connection, a gateway and the other node can neither
// publish body to the first node's subject(nodeID) nor subscribe to it.
func checkOnlyControldReachesNode(t *testing.T, subject func(nodeID string) string, body []byte) {
	t.Helper()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	nodeID, _ := enrolledNode(t, env, "h1")
	otherID, otherKey := enrolledNode(t, env, "h2")
	subj := subject(nodeID)

	user, token := env.AddUser(t, "plain@example.test", api.RoleUser)
	gwKey, gwPub := newKey(t)
	if _, err := env.Client(env.AdminToken).BusIdentityAdd(t.Context(), api.BusIdentityAddRequest{PublicKey: gwPub,
		Kind: api.BusIdentityGateway, Name: "gw"}); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*probe{
		"user":     mustDial(t, env.NATSURL, userOpts(user.ID, token)...),
		"operator": mustDial(t, env.NATSURL, userOpts(env.Admin.ID, env.AdminToken)...),
		"gateway":  mustDial(t, env.NATSURL, keyOpts(t, gwKey)...),
		"node h2":  mustDial(t, env.NATSURL, nodeOpts(otherID, otherKey)...),
	} {
		t.Run(name, func(t *testing.T) {
			p.refusedPub(t, subj, body)
			p.refusedSub(t, subj, "")
		})
	}
}
