package obs

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterNATS exports a connection's reconnects and whether it is
// connected, labelled conn=name (one daemon may hold several).
func RegisterNATS(reg prometheus.Registerer, name string, nc *nats.Conn) error {
	labels := prometheus.Labels{"conn": name}
	reconnects := prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "nats",
		Name: "reconnects_total", Help: "Times the NATS connection reconnected.", ConstLabels: labels},
		func() float64 { return float64(nc.Stats().Reconnects) })
	connected := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "nats",
		Name: "connected", Help: "1 while the NATS connection is connected.", ConstLabels: labels},
		func() float64 {
			if nc.IsConnected() {
				return 1
			}
			return 0
		})
	return errors.Join(reg.Register(reconnects), reg.Register(connected))
}

// NATSCheck is ready while nc is connected.
func NATSCheck(name string, nc *nats.Conn) Check {
	return Check{Name: "nats", Func: func(context.Context) error {
		if !nc.IsConnected() {
			return errors.New(name + " connection is " + nc.Status().String())
		}
		return nil
	}}
}
