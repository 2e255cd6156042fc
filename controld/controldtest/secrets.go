package controldtest

import (
	"crypto/rand"
	"testing"

	"github.com/gpuaas/gpuaas/controld/secrets"
)

// RandomSecretsKey is a fresh secrets key (controld/secrets) for a test.
func RandomSecretsKey(t testing.TB) *secrets.Key {
	t.Helper()
	raw := make([]byte, secrets.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	k, err := secrets.NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
