package hostproto

import (
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// HostLogsRequest is what controld sends as MsgLogs: a node's recent log
// records after seq After, not older than SinceTime, the newest Limit of
// them (answered with an api.NodeLogsResponse).
type HostLogsRequest struct {
	SinceTime time.Time `json:"since_time,omitzero"`
	After     uint64    `json:"after,omitempty"`
	Limit     int       `json:"limit,omitempty"`
}

// HostTopRequest is what controld sends as MsgTop: the GPUs asked
// about, by PCI address.
type HostTopRequest struct {
	PCIs []string `json:"pcis"`
}

// HostTopResponse has the latest sample of each GPU asked about that
// hostd has one for; Error says why there is none when telemetry fails.
type HostTopResponse struct {
	GPUs  []api.GPUSample `json:"gpus"`
	Error string          `json:"error,omitempty"`
}
