package sshwire

import (
	"encoding/binary"
	"errors"

	gossh "golang.org/x/crypto/ssh"
)

// Payloads of session requests (RFC 4254 §6), for gossh.Marshal and
// gossh.Unmarshal.
type (
	// PtyRequestMsg is the payload of "pty-req": the terminal type, its
	// size in characters and pixels, and its encoded modes (see
	// EncodeModes).
	PtyRequestMsg struct {
		Term    string
		Columns uint32
		Rows    uint32
		Width   uint32
		Height  uint32
		Modes   string
	}
	// WindowChangeMsg is the payload of "window-change".
	WindowChangeMsg struct {
		Columns uint32
		Rows    uint32
		Width   uint32
		Height  uint32
	}
	// EnvMsg is the payload of "env".
	EnvMsg struct {
		Name  string
		Value string
	}
	// ExecMsg is the payload of "exec".
	ExecMsg struct {
		Command string
	}
	// SubsystemMsg is the payload of "subsystem".
	SubsystemMsg struct {
		Name string
	}
	// SignalMsg is the payload of "signal": a signal name without "SIG"
	// (see Signal).
	SignalMsg struct {
		Signal string
	}
	// ExitStatusMsg is the payload of "exit-status".
	ExitStatusMsg struct {
		Status uint32
	}
	// ExitSignalMsg is the payload of "exit-signal".
	ExitSignalMsg struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}
)

// DirectTCPIPMsg is the extra data of a direct-tcpip channel open (RFC
// 4254 §7.2): where the client wants to go, and where it came from.
type DirectTCPIPMsg struct {
	DestAddr   string
	DestPort   uint32
	OriginAddr string
	OriginPort uint32
}

// ExitStatus reads the status of an "exit-status" payload; ok is false
// when it is too short to hold one. Bytes after the status are ignored.
func ExitStatus(payload []byte) (status uint32, ok bool) {
	if len(payload) < 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(payload), true
}

// Mode is one terminal mode of a pty-req (RFC 4254 §8): an opcode and
// its value.
type Mode struct {
	Op    byte
	Value uint32
}

// ttyOpEnd ends an encoded mode list; opcodes from 160 on would carry
// more than a uint32, and end the decoding too.
const (
	ttyOpEnd    = 0
	ttyOpLarger = 160
)

// ErrMalformedModes is returned for a mode list cut short.
var ErrMalformedModes = errors.New("malformed terminal modes")

// EncodeModes is the wire form of modes, for PtyRequestMsg.Modes: each
// opcode with its uint32, then TTY_OP_END.
func EncodeModes(modes gossh.TerminalModes) string {
	b := make([]byte, 0, 5*len(modes)+1)
	for op, val := range modes {
		b = append(b, op)
		b = binary.BigEndian.AppendUint32(b, val)
	}
	return string(append(b, ttyOpEnd))
}

// DecodeModes reads an encoded mode list in order, up to TTY_OP_END, an
// opcode of 160 or more, or the end of s (so "" has no modes).
func DecodeModes(s string) ([]Mode, error) {
	var out []Mode
	b := []byte(s)
	for len(b) > 0 {
		op := b[0]
		if op == ttyOpEnd || op >= ttyOpLarger {
			break
		}
		if len(b) < 5 {
			return nil, ErrMalformedModes
		}
		out = append(out, Mode{Op: op, Value: binary.BigEndian.Uint32(b[1:5])})
		b = b[5:]
	}
	return out, nil
}
