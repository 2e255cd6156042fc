package logstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// NextSeq is the number the next line of subject's log takes: one after
// the last line LOGS holds of it (1 when it holds none). A retried job's
// new attempt numbers its lines from there (PumpConfig.Resume), so the
// log keeps one numbering across attempts (docs/jobs.md "Retries").
func NextSeq(ctx context.Context, js jetstream.JetStream, subject string) (int64, error) {
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		return 0, fmt.Errorf("logs stream: %w", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last log batch of %s: %w", subject, err)
	}
	lines, err := decode(m.Data)
	if err != nil {
		return 0, err
	}
	if len(lines) == 0 {
		return 1, nil
	}
	return lines[len(lines)-1].Seq + 1, nil
}
