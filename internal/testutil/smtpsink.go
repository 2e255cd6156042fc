package testutil

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// SMTPSink is a tiny SMTP server on 127.0.0.1 that accepts every message
// and keeps it, enough for net/smtp's client.
type SMTPSink struct {
	ln net.Listener
	// mu protects msgs.
	mu   sync.Mutex
	msgs []SinkMessage
}

// SinkMessage is one message an SMTPSink received.
type SinkMessage struct {
	From string
	To   []string
	Data string
}

// NewSMTPSink listens on a random loopback port until the test ends.
func NewSMTPSink(t *testing.T) *SMTPSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SMTPSink{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	return s
}

// Addr is where the sink listens.
func (s *SMTPSink) Addr() string { return s.ln.Addr().String() }

// Messages returns what the sink received so far.
func (s *SMTPSink) Messages() []SinkMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SinkMessage(nil), s.msgs...)
}

func (s *SMTPSink) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	say("220 sink ready")
	var m SinkMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250 sink")
		case strings.HasPrefix(cmd, "MAIL FROM:"):
			m = SinkMessage{From: strings.Trim(strings.TrimSpace(line)[10:], "<>")}
			say("250 ok")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			m.To = append(m.To, strings.Trim(strings.TrimSpace(line)[8:], "<>"))
			say("250 ok")
		case cmd == "DATA":
			say("354 go ahead")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data = b.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, m)
			s.mu.Unlock()
			say("250 queued")
		case cmd == "QUIT":
			say("221 bye")
			return
		default:
			say("250 ok")
		}
	}
}
