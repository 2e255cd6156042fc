package daemon

import "github.com/spf13/pflag"

// Suggested --metrics-addr ports, one per daemon so they can share a host
// (documented in packaging/etc). The flag is off by default everywhere:
// 27 `hostd --sim` on one machine, or a gateway and a controld, would
// otherwise fight over one default port, and an operator chooses the
// interface (loopback, a management network) on purpose.
const (
	MetricsPortControld = 9464
	MetricsPortSSHGate  = 9465
	MetricsPortHostd    = 9466
)

// addMetricsFlag registers --metrics-addr, the same on the three daemons.
func addMetricsFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "metrics-addr", "", "Serve /healthz, /readyz and Prometheus /metrics on this address (host:port, e.g. 127.0.0.1:9464); empty: not served")
}
