package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestNoResponders: a call nothing serves is unavailable, says so, and is
// told apart from other unavailability by api.ErrNoResponders.
func TestNoResponders(t *testing.T) {
	c := api.NewClient(testutil.NATS(t).Connect(t))
	_, err := c.BillingBalance(context.Background(), api.BillingRequest{})
	if !errors.Is(err, api.ErrUnavailable) || !errors.Is(err, api.ErrNoResponders) {
		t.Fatalf("got %v; want unavailable wrapping ErrNoResponders", err)
	}
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Hint == "" {
		t.Fatalf("got %#v; want an *api.Error with a hint", err)
	}
	hinted := apiErr.WithHint("another")
	if !errors.Is(hinted, api.ErrNoResponders) {
		t.Error("WithHint dropped the cause")
	}
	if errors.Is(api.Errorf(api.CodeUnavailable, "timed out"), api.ErrNoResponders) {
		t.Error("an unavailable error without a cause matched ErrNoResponders")
	}
}
