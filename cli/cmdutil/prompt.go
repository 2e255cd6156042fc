package cmdutil

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Prompt writes question to ErrOut and reads one line from In.
func (s *IOStreams) Prompt(ctx context.Context, question string) (string, error) {
	fmt.Fprint(s.ErrOut, question)
	return interruptible(ctx, s.readLine)
}

// Confirm asks a yes/no question; anything but y or yes is no.
func (s *IOStreams) Confirm(ctx context.Context, question string) (bool, error) {
	answer, err := s.Prompt(ctx, question+" [y/N] ")
	if err != nil {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// ReadPassword writes prompt to ErrOut and reads a line without echoing it
// when In is a terminal (otherwise it reads a plain line).
func (s *IOStreams) ReadPassword(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(s.ErrOut, prompt)
	f, ok := s.In.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return interruptible(ctx, s.readLine)
	}
	fd := int(f.Fd())
	// ReadPassword blocks in read(2) even after Ctrl-C (our signal handler
	// swallows SIGINT), so restore the echo ourselves on cancellation.
	state, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	pw, err := interruptible(ctx, func() (string, error) {
		b, err := term.ReadPassword(fd)
		return string(b), err
	})
	if ctx.Err() != nil {
		_ = term.Restore(fd, state)
	}
	fmt.Fprintln(s.ErrOut)
	return pw, err
}

// ReadAll reads In to the end (e.g. --password-stdin).
func (s *IOStreams) ReadAll(ctx context.Context) (string, error) {
	return interruptible(ctx, func() (string, error) {
		var r io.Reader = s.In
		if s.lines != nil {
			r = s.lines
		}
		b, err := io.ReadAll(r)
		return string(b), err
	})
}

func (s *IOStreams) readLine() (string, error) {
	if s.lines == nil {
		s.lines = bufio.NewReader(s.In)
	}
	line, err := s.lines.ReadString('\n')
	if errors.Is(err, io.EOF) && line != "" {
		err = nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// interruptible runs a blocking read and gives up when ctx ends, leaving
// the read behind: the process is about to exit anyway.
func interruptible(ctx context.Context, read func() (string, error)) (string, error) {
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := read()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
