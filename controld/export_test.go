package controld

import (
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaas/gpuaas/controld/alloc"
)

// EndpointInfo is what tests know of an endpoint of the API.
type EndpointInfo struct {
	Name string
	// Mutates is set on endpoints that change state through mutate.Runner.
	Mutates bool
	// NoReplay is set on mutations whose reply is never stored for replay.
	NoReplay bool
	// Access is who may call it: public, logged_in, operator, admin,
	// gateway or optional_login.
	Access string
}

// Endpoints lists every endpoint registerAPI adds, so that tests walk
// the API as served rather than a list of their own.
func (s *Server) Endpoints() []EndpointInfo {
	var out []EndpointInfo
	for _, ep := range s.endpoints() {
		out = append(out, EndpointInfo{Name: ep.spec.Name, Mutates: ep.spec.Mutates(), NoReplay: !ep.spec.Replayable(),
			Access: ep.spec.Access.String()})
	}
	return out
}

// AllocRules are the rules controld's queue loop places queued requests
// under, for tests that run alloc.PlaceQueued themselves.
func (s *Server) AllocRules() alloc.Rules { return s.allocRules() }

// RepliesRefused is how many requests were dropped for their reply
// subject with reason (gpuaas_api_replies_refused_total).
func (s *Server) RepliesRefused(reason string) float64 {
	var m dto.Metric
	if err := s.metrics.repliesRefused.WithLabelValues(reason).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
