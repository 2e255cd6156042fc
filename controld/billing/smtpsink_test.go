package billing_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// smtpSink is a tiny SMTP server on 127.0.0.1 that accepts every message
// and keeps it, enough for net/smtp's client.
type smtpSink struct {
	ln net.Listener
	// mu protects msgs.
	mu   sync.Mutex
	msgs []sinkMsg
}

type sinkMsg struct {
	From string
	To   []string
	Data string
}

func newSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSink{ln: ln}
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

func (s *smtpSink) Addr() string { return s.ln.Addr().String() }

func (s *smtpSink) Messages() []sinkMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkMsg(nil), s.msgs...)
}

func (s *smtpSink) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	say("220 sink ready")
	var m sinkMsg
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
			m = sinkMsg{From: strings.Trim(strings.TrimSpace(line)[10:], "<>")}
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
