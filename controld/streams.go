package controld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// StreamLimits bound what JetStream keeps: every stream has a size and an
// age limit, and gpuaas_jetstream_stream_bytes against
// gpuaas_jetstream_stream_max_bytes says how full it is (the
// GpuaasStreamFilling alert).
type StreamLimits struct {
	// EventsMaxBytes and EventsMaxAge bound the EVENTS stream (defaults
	// 1 GiB, 7 days); the oldest events go first. Clients resume from it
	// after a reconnect (events.since), so the age is how long a client
	// may be away without missing anything.
	EventsMaxBytes int64
	EventsMaxAge   time.Duration
	// RecordingsMaxBytes and RecordingsMaxAge bound the recordings stream
	// (defaults 10 GiB, 90 days). Recordings are retired by age only:
	// when the stream is full new recordings are refused (and the gateway
	// says so in its log), never old ones dropped early.
	RecordingsMaxBytes int64
	RecordingsMaxAge   time.Duration
	// LogsMaxBytes and LogsMaxAge bound the LOGS stream of jobs' output
	// (defaults 1 GiB, 7 days: logs stay readable after their
	// allocation is released until then); the oldest go first.
	// JobLogMaxBytes bounds one job's log (default 64 MiB), cut by hostd
	// with a marker line (docs/decisions/0022-logs-in-jetstream.md).
	LogsMaxBytes   int64
	LogsMaxAge     time.Duration
	JobLogMaxBytes int64
}

// CheckAndSetDefaults fills defaults and refuses negative limits.
func (l *StreamLimits) CheckAndSetDefaults() error {
	for _, d := range []struct {
		v   *int64
		def int64
	}{{&l.EventsMaxBytes, 1 << 30}, {&l.RecordingsMaxBytes, 10 << 30}, {&l.LogsMaxBytes, 1 << 30}, {&l.JobLogMaxBytes, 64 << 20}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return errors.New("controld: stream byte limits must be positive")
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&l.EventsMaxAge, 7 * 24 * time.Hour}, {&l.RecordingsMaxAge, 90 * 24 * time.Hour}, {&l.LogsMaxAge, 7 * 24 * time.Hour}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Minute {
			return errors.New("controld: stream age limits must be at least a minute")
		}
	}
	return nil
}

// ensureStreams creates or updates the EVENTS and recordings streams with
// their replicas and limits.
func (s *Server) ensureStreams(ctx context.Context) error {
	l := s.cfg.Streams
	if err := outbox.EnsureStream(ctx, s.js, s.cfg.StreamReplicas, l.EventsMaxBytes, l.EventsMaxAge); err != nil {
		return err
	}
	if _, err := s.js.CreateOrUpdateStream(ctx, recstore.StreamConfig(s.cfg.StreamReplicas,
		l.RecordingsMaxBytes, l.RecordingsMaxAge)); err != nil {
		return fmt.Errorf("recordings stream %s: %w", recstore.Stream, err)
	}
	if err := s.ensureLogStream(ctx); err != nil { // handlers_logs.go
		return err
	}
	return s.limitLegacyRecordings(ctx)
}

// limitLegacyRecordings gives the object store bucket recordings went to
// before recstore, where it still exists, the recordings' limits: it is
// read, never written, and empties as its recordings age out.
func (s *Server) limitLegacyRecordings(ctx context.Context) error {
	st, err := s.js.Stream(ctx, "OBJ_"+api.RecordingsBucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("legacy recordings bucket: %w", err)
	}
	cfg := st.CachedInfo().Config
	l := s.cfg.Streams
	if cfg.MaxBytes == l.RecordingsMaxBytes && cfg.MaxAge == l.RecordingsMaxAge {
		return nil
	}
	cfg.MaxBytes, cfg.MaxAge = l.RecordingsMaxBytes, l.RecordingsMaxAge
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("legacy recordings bucket: %w", err)
	}
	return nil
}

var (
	streamBytesDesc = prometheus.NewDesc(obs.Namespace+"_jetstream_stream_bytes",
		"Bytes a JetStream stream of gpuaas holds.", []string{"stream"}, nil)
	streamMaxBytesDesc = prometheus.NewDesc(obs.Namespace+"_jetstream_stream_max_bytes",
		"A JetStream stream's byte limit.", []string{"stream"}, nil)
	streamMsgsDesc = prometheus.NewDesc(obs.Namespace+"_jetstream_stream_messages",
		"Messages a JetStream stream of gpuaas holds.", []string{"stream"}, nil)
)

// streamCollector reads the streams' fill at scrape time.
type streamCollector struct{ s *Server }

func (c *streamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- streamBytesDesc
	ch <- streamMaxBytesDesc
	ch <- streamMsgsDesc
}

func (c *streamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dbCollectTimeout)
	defer cancel()
	for _, name := range []string{api.EventStreamName, recstore.Stream, "KV_" + outbox.HeadsBucket, logstream.Stream} {
		st, err := c.s.js.Stream(ctx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ctx)
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(streamBytesDesc, fmt.Errorf("stream %s: %w", name, err))
			continue
		}
		ch <- prometheus.MustNewConstMetric(streamBytesDesc, prometheus.GaugeValue, float64(info.State.Bytes), name)
		ch <- prometheus.MustNewConstMetric(streamMaxBytesDesc, prometheus.GaugeValue, float64(info.Config.MaxBytes), name)
		ch <- prometheus.MustNewConstMetric(streamMsgsDesc, prometheus.GaugeValue, float64(info.State.Msgs), name)
	}
}
