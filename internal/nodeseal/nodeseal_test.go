package nodeseal_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/internal/nodeseal"
)

func TestSealOpensOnlyForItsNode(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("TOKEN=s3cr3t value")
	sealed, err := nodeseal.Seal(pub, msg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, msg) || bytes.Contains(sealed, []byte("s3cr3t")) {
		t.Fatalf("sealed value holds the plaintext: %q", sealed)
	}
	o, err := nodeseal.NewOpener(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.Open(sealed)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("Open = %q, %v; want %q", got, err, msg)
	}
	wrong, err := nodeseal.NewOpener(other.Seed())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Open(sealed); !errors.Is(err, nodeseal.ErrOpen) {
		t.Fatalf("another node's Open: err = %v; want ErrOpen", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := o.Open(sealed); !errors.Is(err, nodeseal.ErrOpen) {
		t.Fatalf("Open of a damaged value: err = %v; want ErrOpen", err)
	}
}

func TestSealRefusesABadKey(t *testing.T) {
	if _, err := nodeseal.Seal(ed25519.PublicKey{1, 2, 3}, []byte("x")); err == nil {
		t.Fatal("Seal to a 3-byte key: no error")
	}
}
