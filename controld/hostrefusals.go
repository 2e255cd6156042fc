package controld

import "github.com/gpuaas/gpuaas/controld/hosts"

// HostRefusals counts the messages this replica ignored in nodes' names:
// forged or misdirected task replies and refused (forged, stale or
// replayed) node reports.
func (s *Server) HostRefusals() hosts.Refusals { return s.hosts.Refusals() }
