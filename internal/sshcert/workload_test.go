package sshcert

import (
	"errors"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestTicketNamesAWorkload: a ticket may name a workload
// (OptionWorkload, optional, signed like the rest) and VerifyTicket
// returns it; one without names none; an empty workload option is
// refused, and other unknown options still are.
func TestTicketNamesAWorkload(t *testing.T) {
	caKey := newPrivateKey(t)
	ca := newAuthority(t, "internal", caKey)
	caSigner, err := ssh.NewSignerFromKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	key := newSigner(t).PublicKey()
	base := Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu-a-1"}
	for _, want := range []string{"w-abc", ""} {
		tk := base
		tk.Workload = want
		cert, err := ca.SignTicket(key, tk, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := VerifyTicket(ca.Trusted(), cert, "n-1", now)
		if err != nil || got.Workload != want || got.Allocation != "a-1" {
			t.Errorf("workload %q: %+v, %v", want, got, err)
		}
	}
	if _, err := ca.SignTicket(key, Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu-a-1", Workload: "w 1"}, now); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a workload with a space: %v; want ErrInvalidRequest", err)
	}
	after, before := window(-TicketSkew, DefaultTicketTTL)
	for _, opts := range []map[string]string{
		{OptionNode: "n-1", OptionAllocation: "a-1", OptionPosixUser: "gpu-a-1", OptionWorkload: ""},
		{OptionNode: "n-1", OptionAllocation: "a-1", OptionPosixUser: "gpu-a-1", OptionWorkload: "w-1", "gpuaas-other": "x"},
	} {
		cert := craft(t, caSigner, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{"gpu-a-1"},
			ValidAfter: after, ValidBefore: before, Permissions: ssh.Permissions{CriticalOptions: opts}})
		if _, err := VerifyTicket(ca.Trusted(), cert, "n-1", now); !errors.Is(err, ErrCriticalOption) {
			t.Errorf("options %v: %v; want ErrCriticalOption", opts, err)
		}
	}
}
