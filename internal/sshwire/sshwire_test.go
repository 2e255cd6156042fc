package sshwire

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

func TestSignals(t *testing.T) {
	tests := []struct {
		name  string
		want  syscall.Signal
		linux int
	}{
		{"INT", syscall.SIGINT, 2},
		{"KILL", syscall.SIGKILL, 9},
		{"USR1", syscall.SIGUSR1, 10},
		{"TERM", syscall.SIGTERM, 15},
	}
	for _, tt := range tests {
		got, ok := Signal(tt.name)
		if !ok || got != tt.want {
			t.Errorf("Signal(%q) = %v, %v; want %v, true", tt.name, got, ok, tt.want)
		}
		if got := SignalName(tt.want); got != tt.name {
			t.Errorf("SignalName(%v) = %q; want %q", tt.want, got, tt.name)
		}
		if got := LinuxSignalNumber(tt.name); got != tt.linux {
			t.Errorf("LinuxSignalNumber(%q) = %d; want %d", tt.name, got, tt.linux)
		}
	}
	// RFC 4254 names 13 signals; SIG-prefixed or unknown names are none.
	if len(signals) != 13 {
		t.Errorf("got %d signals; want the RFC's 13", len(signals))
	}
	for _, name := range []string{"SIGINT", "WINCH", ""} {
		if _, ok := Signal(name); ok || LinuxSignalNumber(name) != 0 {
			t.Errorf("Signal(%q): known; want unknown", name)
		}
	}
	if got := SignalName(syscall.SIGWINCH); got != "" {
		t.Errorf("SignalName(SIGWINCH) = %q; want \"\"", got)
	}
}

func TestModes(t *testing.T) {
	in := gossh.TerminalModes{gossh.ECHO: 1, gossh.VERASE: 127, gossh.TTY_OP_ISPEED: 38400}
	enc := EncodeModes(in)
	if len(enc) != 5*len(in)+1 || enc[len(enc)-1] != 0 {
		t.Fatalf("EncodeModes = %q; want 5 bytes a mode and TTY_OP_END", enc)
	}
	got, err := DecodeModes(enc)
	if err != nil {
		t.Fatal(err)
	}
	back := gossh.TerminalModes{}
	for _, m := range got {
		back[m.Op] = m.Value
	}
	if len(back) != len(in) || back[gossh.ECHO] != 1 || back[gossh.VERASE] != 127 || back[gossh.TTY_OP_ISPEED] != 38400 {
		t.Errorf("DecodeModes(EncodeModes(%v)) = %v; want the same modes", in, back)
	}

	tests := []struct {
		name    string
		in      string
		want    []Mode
		wantErr error
	}{
		{name: "empty", in: ""},
		{name: "end only", in: "\x00"},
		{name: "in order", in: "\x35\x00\x00\x00\x01\x5a\x00\x00\x00\x01\x00", want: []Mode{{0x35, 1}, {0x5a, 1}}},
		{name: "stops at a larger opcode", in: "\x35\x00\x00\x00\x01\xa0junk", want: []Mode{{0x35, 1}}},
		{name: "cut short", in: "\x35\x00\x00", wantErr: ErrMalformedModes},
	}
	for _, tt := range tests {
		got, err := DecodeModes(tt.in)
		if !errors.Is(err, tt.wantErr) || !slices.Equal(got, tt.want) {
			t.Errorf("%s: DecodeModes = %v, %v; want %v, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestExitStatus(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    uint32
		wantOK  bool
	}{
		{"marshalled", gossh.Marshal(ExitStatusMsg{Status: 3}), 3, true},
		{"trailing bytes ignored", []byte{0, 0, 1, 0, 9}, 256, true},
		{"too short", []byte{0, 0, 1}, 0, false},
	}
	for _, tt := range tests {
		got, ok := ExitStatus(tt.payload)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: got %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}
