package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
)

// fanoutConsumer is the durable consumer shared by every controld replica.
const fanoutConsumer = "user-fanout"

// Fanout forwards each event of the EVENTS stream to the subjects of the
// users it names, gpuaas.user.<uid>.evt.<kind>. Delivery is at least once;
// events carry their outbox id so consumers can drop repeats.
func Fanout(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, log *slog.Logger) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, api.EventStreamName, jetstream.ConsumerConfig{
		Durable:   fanoutConsumer,
		AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		return fmt.Errorf("fanout consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev api.Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			log.Error("fanout: undecodable event", "err", err)
			_ = m.Term()
			return
		}
		for _, u := range ev.Users {
			if err := nc.Publish(api.UserEventSubject(u, ev.Kind), m.Data()); err != nil {
				_ = m.Nak()
				return
			}
		}
		_ = m.Ack()
	})
	if err != nil {
		return fmt.Errorf("fanout consume: %w", err)
	}
	<-ctx.Done()
	cc.Stop()
	return nil
}
