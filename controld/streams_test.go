package controld_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// TestStreamsHaveLimits reads the streams' configuration back from the
// server: EVENTS and the recordings stream each have a byte and an age
// limit (controld's, not the server's unlimited default), and recordings
// cannot be deleted, purged or written twice.
func TestStreamsHaveLimits(t *testing.T) {
	t.Parallel()
	limits := controld.StreamLimits{EventsMaxBytes: 64 << 20, EventsMaxAge: time.Hour,
		RecordingsMaxBytes: 128 << 20, RecordingsMaxAge: 48 * time.Hour}
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Streams: limits})
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		stream   string
		maxBytes int64
		maxAge   time.Duration
	}{
		{api.EventStreamName, limits.EventsMaxBytes, limits.EventsMaxAge},
		{recstore.Stream, limits.RecordingsMaxBytes, limits.RecordingsMaxAge},
	} {
		s, err := js.Stream(t.Context(), tt.stream)
		if err != nil {
			t.Fatalf("stream %s: %v", tt.stream, err)
		}
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxBytes != tt.maxBytes || info.Config.MaxAge != tt.maxAge {
			t.Errorf("%s: max bytes %d, max age %v; want %d, %v", tt.stream, info.Config.MaxBytes, info.Config.MaxAge,
				tt.maxBytes, tt.maxAge)
		}
		if tt.stream == recstore.Stream {
			c := info.Config
			if !c.DenyDelete || !c.DenyPurge || !c.DiscardNewPerSubject || c.MaxMsgsPerSubject != 1 || c.Discard != jetstream.DiscardNew {
				t.Errorf("%s is not sealed: deny delete %v, deny purge %v, discard new per subject %v, max per subject %d",
					tt.stream, c.DenyDelete, c.DenyPurge, c.DiscardNewPerSubject, c.MaxMsgsPerSubject)
			}
		}
	}
}

// TestStreamLimitsRefused: a negative size or an age under a minute is
// refused with the field's meaning, and nothing starts.
func TestStreamLimitsRefused(t *testing.T) {
	for _, l := range []controld.StreamLimits{{EventsMaxBytes: -1}, {RecordingsMaxAge: time.Second}} {
		if err := l.CheckAndSetDefaults(); err == nil {
			t.Errorf("%+v: accepted", l)
		}
	}
}

// TestLegacyRecordingsBucketGetsLimits: the object store bucket of
// recordings made before they were sealed, where it exists, gets the
// recordings' limits at start (it had none).
func TestLegacyRecordingsBucketGetsLimits(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	js, err := jetstream.New(env.Bus.Connect(t)) // survives controld's restart
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: api.RecordingsBucket}); err != nil {
		t.Fatal(err)
	}
	env.Restart(t, nil)
	s, err := js.Stream(t.Context(), "OBJ_"+api.RecordingsBucket)
	if err != nil {
		t.Fatal(err)
	}
	want := controld.StreamLimits{}
	if err := want.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.MaxBytes != want.RecordingsMaxBytes || c.MaxAge != want.RecordingsMaxAge {
		t.Fatalf("legacy bucket: max bytes %d, max age %v; want %d, %v", c.MaxBytes, c.MaxAge, want.RecordingsMaxBytes, want.RecordingsMaxAge)
	}
}
