package corrid

import (
	"context"
	"strings"
	"testing"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		name         string
		id           string
		wantKept     bool
		wantReplaced bool
	}{
		{name: "plain", id: "deploy-42", wantKept: true},
		{name: "generated", id: New(), wantKept: true},
		{name: "punctuation allowed", id: "ci:run_7.step-3", wantKept: true},
		{name: "longest", id: strings.Repeat("a", MaxLen), wantKept: true},
		{name: "empty", id: "", wantReplaced: false},
		{name: "too long", id: strings.Repeat("a", MaxLen+1), wantReplaced: true},
		{name: "newline", id: "x\nlevel=ERROR msg=forged", wantReplaced: true},
		{name: "escape", id: "x\x1b[31m", wantReplaced: true},
		{name: "space", id: "a b", wantReplaced: true},
		{name: "equals", id: "corr=other", wantReplaced: true},
		{name: "non-ascii", id: "café", wantReplaced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, replaced := Sanitize(tt.id)
			if tt.wantKept && got != tt.id {
				t.Fatalf("Sanitize(%q) = %q; want it kept", tt.id, got)
			}
			if !tt.wantKept && (got == tt.id || !Valid(got)) {
				t.Fatalf("Sanitize(%q) = %q; want a fresh valid id", tt.id, got)
			}
			if replaced != tt.wantReplaced {
				t.Fatalf("Sanitize(%q) replaced = %v; want %v", tt.id, replaced, tt.wantReplaced)
			}
		})
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := From(ctx); got != "" {
		t.Fatalf("From(empty) = %q; want \"\"", got)
	}
	if got := From(With(ctx, "abc")); got != "abc" {
		t.Fatalf("From(With(abc)) = %q; want abc", got)
	}
}
