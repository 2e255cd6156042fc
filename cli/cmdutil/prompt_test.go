package cmdutil

import (
	"context"
	"errors"
	"io"
	"testing"
)

func TestConfirm(t *testing.T) {
	tests := []struct {
		input string
		want  bool
	}{
		{"y\n", true},
		{"YES\n", true},
		{"n\n", false},
		{"\n", false},
		{"", false},
	}
	for _, tt := range tests {
		ios, in, _, errOut := Test()
		in.WriteString(tt.input)
		got, err := ios.Confirm(context.Background(), "Release a-1?")
		if tt.input == "" {
			if err == nil {
				t.Errorf("%q: got no error at EOF; want one", tt.input)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%q: got %v; want %v", tt.input, got, tt.want)
		}
		if errOut.String() != "Release a-1? [y/N] " {
			t.Errorf("got prompt %q", errOut.String())
		}
	}
}

func TestPromptsShareBufferedInput(t *testing.T) {
	ios, in, _, _ := Test()
	in.WriteString("ada@example.com\r\nhunter2\nrest\n")
	ctx := context.Background()
	email, err := ios.Prompt(ctx, "Email: ")
	if err != nil || email != "ada@example.com" {
		t.Fatalf("got %q, %v; want ada@example.com", email, err)
	}
	pw, err := ios.ReadPassword(ctx, "Password: ")
	if err != nil || pw != "hunter2" {
		t.Fatalf("got %q, %v; want hunter2", pw, err)
	}
	rest, err := ios.ReadAll(ctx)
	if err != nil || rest != "rest\n" {
		t.Fatalf("got %q, %v; want the rest of the input", rest, err)
	}
}

func TestPromptInterrupted(t *testing.T) {
	r, w := io.Pipe() // never written: the read blocks
	defer w.Close()
	ios, _, _, _ := Test()
	ios.In = r
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ios.Prompt(ctx, "Email: "); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v; want context.Canceled", err)
	}
}
