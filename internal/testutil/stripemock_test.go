package testutil

import (
	"net/http"
	"testing"
)

func TestStripeMockAnswers(t *testing.T) {
	t.Parallel()
	base := StripeMock(t)
	req, err := http.NewRequest(http.MethodGet, base+"/v1/balance", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("sk_test_123", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/balance: got %s; want 200", resp.Status)
	}
	// Without an API key stripe-mock refuses, as Stripe does: it really is
	// the mock answering, not some other server.
	resp, err = http.Get(base + "/v1/balance")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/balance without a key: got %s; want 401", resp.Status)
	}
}
