package session

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
)

var started = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

func intPtr(v int) *int { return &v }

func testSessions() []api.TerminalSession {
	ended := started.Add(90 * time.Second)
	return []api.TerminalSession{
		{ID: "s-2", UserID: "u-1", AllocationID: "a-1", Kind: api.SessionShell, StartedAt: started, EndedAt: &ended,
			Bytes: 1234, ExitStatus: intPtr(0), State: api.SessionEnded, Recording: "s-2.cast"},
		{ID: "s-1", UserID: "u-1", AllocationID: "a-2", Kind: api.SessionExec, Command: "nvidia-smi", StartedAt: started,
			ExitStatus: nil, State: api.SessionRunning},
		{ID: "s-0", UserID: "u-1", AllocationID: "a-2", Kind: api.SessionShell, StartedAt: started, EndedAt: &ended,
			Bytes: 77, State: api.SessionInterrupted, Recording: "s-0"},
	}
}

// serveSessions answers session.list and session.get from sessions on the
// controld stand-in. The list requests it got are returned by the func.
func serveSessions(t *testing.T, ctrl *sshkeystest.Controld, sessions []api.TerminalSession) func() []api.SessionListRequest {
	var mu sync.Mutex // protects reqs
	var reqs []api.SessionListRequest
	ctrl.Handle(t, api.EndpointSessionList, func(m *nats.Msg) (any, error) {
		var req api.SessionListRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		return api.SessionListResponse{Sessions: sessions}, nil
	})
	ctrl.Handle(t, api.EndpointSessionGet, func(m *nats.Msg) (any, error) {
		var ref api.SessionRef
		_ = json.Unmarshal(m.Data, &ref)
		for _, s := range sessions {
			if s.ID == ref.ID {
				return s, nil
			}
		}
		return nil, api.Errorf(api.CodeNotFound, "session %s not found", ref.ID)
	})
	return func() []api.SessionListRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]api.SessionListRequest(nil), reqs...)
	}
}
