package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestRateLimited(t *testing.T) {
	tests := []struct {
		wait     time.Duration
		wantSecs int
		wantHint string
	}{
		{20 * time.Millisecond, 1, "retry in 1s"},
		{45 * time.Second, 45, "retry in 45s"},
		{60 * time.Second, 60, "retry in 1m"},
		{150*time.Second + time.Millisecond, 151, "retry in 2m31s"},
		{time.Hour, 3600, "retry in 1h"},
	}
	for _, tt := range tests {
		e := api.RateLimited("slow down", tt.wait)
		if e.Code != api.CodeRateLimited || e.RetryAfterSeconds != tt.wantSecs || e.Hint != tt.wantHint {
			t.Errorf("RateLimited(%v): got %+v; want %ds, hint %q", tt.wait, *e, tt.wantSecs, tt.wantHint)
		}
		var back api.Error
		if err := json.Unmarshal(e.Marshal(), &back); err != nil || back.RetryAfterSeconds != tt.wantSecs {
			t.Errorf("RateLimited(%v) on the wire: got %+v, %v; want retry_after_seconds %d", tt.wait, back, err, tt.wantSecs)
		}
	}
}
