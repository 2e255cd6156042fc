package daemon

import (
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/internal/bus"
)

// natsFlags are the NATS connection flags every daemon takes: where the
// servers are and how TLS is checked. The connection's identity is each
// daemon's own (controld's keys, hostd's node key, sshgate's nkey).
type natsFlags struct {
	URL            string
	CA, Cert, Key  string
	AllowPlaintext bool
}

func (n *natsFlags) register(fl *pflag.FlagSet, urlFlag string) {
	fl.StringVar(&n.URL, urlFlag, "nats://127.0.0.1:4222", "NATS server URL(s), comma-separated")
	fl.StringVar(&n.CA, "nats-ca", "", "CA certificate(s) (PEM) the NATS servers' certificates must chain to")
	fl.StringVar(&n.Cert, "nats-cert", "", "Client certificate (PEM) for NATS servers that verify clients")
	fl.StringVar(&n.Key, "nats-key", "", "Private key (PEM) of --nats-cert")
	fl.BoolVar(&n.AllowPlaintext, "nats-insecure-plaintext", false,
		"Allow a plaintext connection to a NATS server that is not on this machine (never do this across a network)")
}

// natsEnv maps the NATS flags to the variables that stand in for them:
// GPUAAS_NATS_URL, GPUAAS_NATS_CA, GPUAAS_NATS_CERT and GPUAAS_NATS_KEY,
// with more of a daemon's own.
func natsEnv(urlFlag string, more map[string]string) map[string]string {
	m := map[string]string{urlFlag: "GPUAAS_NATS_URL", "nats-ca": "GPUAAS_NATS_CA",
		"nats-cert": "GPUAAS_NATS_CERT", "nats-key": "GPUAAS_NATS_KEY"}
	for k, v := range more {
		m[k] = v
	}
	return m
}

func (n *natsFlags) tls() bus.TLS {
	return bus.TLS{CAFile: n.CA, CertFile: n.Cert, KeyFile: n.Key, AllowPlaintext: n.AllowPlaintext}
}
