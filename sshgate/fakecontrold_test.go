package sshgate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// fakeControld answers the endpoints the gateway calls, on a real NATS
// server, with certificate authorities the test controls. It stands in for
// controld until the gateway is tested against the real one
// (e2e_test.go); it speaks the same wire protocol (api.Client is the
// client).
type fakeControld struct {
	t      testing.TB
	nc     *nats.Conn
	userCA *sshcert.Authority
	// userCAKey is userCA's signing key, for certificates SignUser
	// refuses to mint.
	userCAKey gossh.Signer
	hostCA    *sshcert.Authority
	intCA     *sshcert.Authority

	// mu protects the following.
	mu         sync.Mutex
	userKeys   []gossh.PublicKey // user CA keys listed by ssh.cas (default: userCA.Trusted())
	node       string            // the node every allocation is on
	addr       string            // its terminal address
	hostKey    string            // its terminal host key, as hostd reported it ("" for none)
	allocs     map[string]string // allocation id → owner user id
	tokens     map[string]string // session token → user id (auth.whoami)
	authorized []api.GateAuthorizeRequest
	sessions   map[string]*api.TerminalSession
	started    []string // session ids, in order
	hostCerts  int
}

func newFakeControld(t testing.TB, nc *nats.Conn) *fakeControld {
	t.Helper()
	userKey := newPrivateKey(t)
	userCA, err := sshcert.New(api.CAUser, userKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeControld{
		t: t, nc: nc, userCA: userCA, userCAKey: signerOf(t, userKey),
		hostCA: newAuthority(t, api.CAHost), intCA: newAuthority(t, api.CAInternal),
		node: ids.New(ids.Node), allocs: map[string]string{}, tokens: map[string]string{},
		sessions: map[string]*api.TerminalSession{},
	}
	f.handle(api.EndpointSSHCAs, f.sshCAs)
	f.handle(api.EndpointGateHostCert, f.hostCert)
	f.handle(api.EndpointGateAuthorize, f.authorize)
	f.handle(api.EndpointSessionStart, f.sessionStart)
	f.handle(api.EndpointSessionEnd, f.sessionEnd)
	f.handle(api.EndpointAuthWhoami, f.whoami)
	return f
}

func newAuthority(t testing.TB, name string) *sshcert.Authority {
	t.Helper()
	k, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	a, err := sshcert.New(name, k)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// handle serves endpoint with fn: its result is the JSON reply, an
// *api.Error an error reply as controld sends it.
func (f *fakeControld) handle(endpoint string, fn func(m *nats.Msg) (any, error)) {
	sub, err := f.nc.Subscribe(api.Subject(endpoint), func(m *nats.Msg) {
		out, err := fn(m)
		reply := nats.NewMsg(m.Reply)
		if err != nil {
			apiErr, ok := err.(*api.Error)
			if !ok {
				apiErr = &api.Error{Code: api.CodeInternal, Message: err.Error()}
			}
			reply.Header.Set(micro.ErrorCodeHeader, string(apiErr.Code))
			reply.Header.Set(micro.ErrorHeader, apiErr.Message)
			reply.Data, _ = json.Marshal(apiErr)
		} else {
			reply.Data, _ = json.Marshal(out)
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func authorizedKeys(keys []gossh.PublicKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))))
	}
	return out
}

func (f *fakeControld) sshCAs(*nats.Msg) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	user := f.userKeys
	if user == nil {
		user = f.userCA.Trusted()
	}
	return api.SSHCAsResponse{User: authorizedKeys(user), Host: authorizedKeys(f.hostCA.Trusted()),
		Internal: authorizedKeys(f.intCA.Trusted())}, nil
}

// setUserCAKeys changes the user CA keys ssh.cas lists (a rotation).
func (f *fakeControld) setUserCAKeys(keys ...gossh.PublicKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.userKeys = append([]gossh.PublicKey{}, keys...) // never nil: nil means the CA's own
}

func (f *fakeControld) hostCert(m *nats.Msg) (any, error) {
	var req api.GateHostCertRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, err
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(req.PublicKey))
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	cert, err := f.hostCA.SignHost(pub, req.Principals, 30*24*time.Hour, time.Now())
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	f.mu.Lock()
	f.hostCerts++
	f.mu.Unlock()
	return api.SSHCertResponse{Certificate: string(gossh.MarshalAuthorizedKey(cert)),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0)}, nil
}

// addAlloc makes a fresh allocation owned by user and returns its id.
func (f *fakeControld) addAlloc(user string) string {
	id := ids.New(ids.Allocation)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs[id] = user
	return id
}

// setNode points every allocation at the terminal server at addr, whose
// host key hostd reported as hostKey (nil: none).
func (f *fakeControld) setNode(node, addr string, hostKey gossh.PublicKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node, f.addr, f.hostKey = node, addr, ""
	if hostKey != nil {
		f.hostKey = strings.TrimSpace(string(gossh.MarshalAuthorizedKey(hostKey)))
	}
}

func (f *fakeControld) authorize(m *nats.Msg) (any, error) {
	var req api.GateAuthorizeRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.authorized = append(f.authorized, req)
	owner, ok := f.allocs[req.AllocationID]
	node, addr, hostKey := f.node, f.addr, f.hostKey
	f.mu.Unlock()
	if !ok {
		return nil, &api.Error{Code: api.CodeNotFound, Message: "no allocation " + req.AllocationID}
	}
	if owner != req.UserID {
		return nil, &api.Error{Code: api.CodeForbidden, Message: "allocation " + req.AllocationID + " is not yours"}
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(req.TicketKey))
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	t := sshcert.Ticket{Node: node, Allocation: req.AllocationID, PosixUser: api.PosixUser(req.AllocationID), KeyID: req.UserID}
	cert, err := f.intCA.SignTicket(pub, t, time.Now())
	if err != nil {
		return nil, err
	}
	return api.GateAuthorizeResponse{AllocationID: req.AllocationID, NodeID: node, Shape: "baremetal",
		PosixUser: t.PosixUser, TerminalAddr: addr, TerminalHostKey: hostKey, Ticket: string(gossh.MarshalAuthorizedKey(cert)),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0)}, nil
}

// authorizedUsers lists the user ids gate.authorize was asked about.
func (f *fakeControld) authorizedUsers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.authorized {
		out = append(out, r.UserID)
	}
	return out
}

func (f *fakeControld) sessionStart(m *nats.Msg) (any, error) {
	var req api.SessionStartRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, err
	}
	ts := &api.TerminalSession{ID: ids.New(ids.Session), UserID: req.UserID, AllocationID: req.AllocationID,
		Kind: req.Kind, Command: req.Command, StartedAt: time.Now(), Recording: req.Recording}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[ts.ID] = ts
	f.started = append(f.started, ts.ID)
	return ts, nil
}

func (f *fakeControld) sessionEnd(m *nats.Msg) (any, error) {
	var req api.SessionEndRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ts, ok := f.sessions[req.ID]
	if !ok {
		return nil, &api.Error{Code: api.CodeNotFound, Message: "no session " + req.ID}
	}
	if ts.EndedAt == nil {
		now := time.Now()
		ts.EndedAt, ts.Bytes, ts.ExitStatus = &now, req.Bytes, req.ExitStatus
		if req.Recording != "" {
			ts.Recording = req.Recording
		}
	}
	return ts, nil
}

// endedSession waits until the last session started of the given kind
// (and command, unless empty) has ended, and returns it.
func (f *fakeControld) endedSession(t *testing.T, kind, command string) api.TerminalSession {
	t.Helper()
	var got api.TerminalSession
	eventually(t, fmt.Sprintf("a %s session %q indexed and ended", kind, command), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, id := range slices.Backward(f.started) {
			ts := f.sessions[id]
			if ts.Kind != kind || (command != "" && ts.Command != command) {
				continue
			}
			if ts.EndedAt != nil {
				got = *ts
				return true
			}
			return false
		}
		return false
	})
	return got
}

func (f *fakeControld) whoami(m *nats.Msg) (any, error) {
	tok := strings.TrimPrefix(m.Header.Get(api.HeaderAuthorization), "Bearer ")
	f.mu.Lock()
	user, ok := f.tokens[tok]
	f.mu.Unlock()
	if !ok {
		return nil, &api.Error{Code: api.CodeUnauthenticated, Message: "invalid token"}
	}
	return api.WhoamiResponse{User: api.User{ID: user, Email: user + "@example.test", Role: "user"}}, nil
}
