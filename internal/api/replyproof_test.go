package api_test

import (
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestCanonicalUserKey: a user key is accepted in its one spelling only —
// nkeys' decoder skips line breaks, so a key with a "\r" in it decodes to
// another key's bytes — and never an account key or garbage.
func TestCanonicalUserKey(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	acct, _ := nkeys.CreateAccount()
	apub, _ := acct.PublicKey()
	for _, tt := range []struct {
		key  string
		want bool
	}{
		{pub, true},
		{pub[:10] + "\r" + pub[10:], false},
		{pub[:10] + "\n" + pub[10:], false},
		{apub, false},
		{"U" + pub[1:len(pub)-1], false},
		{"", false},
	} {
		if got := api.CanonicalUserKey(tt.key); got != tt.want {
			t.Errorf("CanonicalUserKey(%q) = %v; want %v", tt.key, got, tt.want)
		}
	}
}

// TestReplyProofOnlyForItsKey: a proof verifies for its key's inbox and no
// other, and not in another spelling of the key.
func TestReplyProofOnlyForItsKey(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	other, _ := nkeys.CreateUser()
	opub, _ := other.PublicKey()
	proof, err := api.ReplyProof(kp)
	if err != nil {
		t.Fatal(err)
	}
	if !api.VerifyReplyProof(pub, proof) {
		t.Fatal("a key's own proof was refused")
	}
	for _, key := range []string{opub, pub[:10] + "\r" + pub[10:]} {
		if api.VerifyReplyProof(key, proof) {
			t.Errorf("the proof of %s verified for %q", pub, key)
		}
	}
	if owner, ok := api.InboxOwner(api.InboxPrefix(pub) + ".mux.1"); !ok || owner != pub {
		t.Errorf("InboxOwner of the key's inbox: %q, %v", owner, ok)
	}
	for _, reply := range []string{"_INBOX_" + pub + ".x", api.InboxPrefix(pub), "gpuaas.user.u-1.evt.x", "_INBOX.*.x", ""} {
		if owner, ok := api.InboxOwner(reply); ok {
			t.Errorf("InboxOwner(%q) = %q; want none", reply, owner)
		}
	}
}
