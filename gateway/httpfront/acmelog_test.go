package httpfront

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"go.uber.org/zap"
)

// TestZapToSlog: certmagic's zap logs reach the gateway's slog logger
// with their fields and level; levels the handler drops are dropped.
func TestZapToSlog(t *testing.T) {
	var buf bytes.Buffer
	zl := zapToSlog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	zl.Debug("hidden")
	zl.Named("obtain").With(zap.String("identifier", "8888-a-1.apps.example.test")).Warn("will retry", zap.Int("attempt", 2))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("one JSON line: got %q: %v", buf.String(), err)
	}
	for k, want := range map[string]any{"msg": "acme: will retry", "level": "WARN", "identifier": "8888-a-1.apps.example.test",
		"attempt": float64(2), "logger": "obtain"} {
		if got[k] != want {
			t.Errorf("%s: got %v; want %v (line %s)", k, got[k], want, buf.String())
		}
	}
}
