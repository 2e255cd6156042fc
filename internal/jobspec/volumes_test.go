package jobspec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestParseVolumes: volumes is a list of `alloc create --volume`'s
// NAME[:/path], read by its parser (docs/jobs.md, "Volumes").
func TestParseVolumes(t *testing.T) {
	s, err := Parse([]byte("resources: {sku: h100}\nrun: x\nvolumes: [data:/data/x, ckpt, vol-7k2m9x4q1c:/checkpoints]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []api.VolumeMount{{Volume: "data", Path: "/data/x"}, {Volume: "ckpt"}, {Volume: "vol-7k2m9x4q1c", Path: "/checkpoints"}}
	if !slices.Equal(s.Volumes, want) {
		t.Errorf("got %+v; want %+v", s.Volumes, want)
	}
	if s, err := Parse([]byte("resources: {sku: h100}\nrun: x\nvolumes:\n")); err != nil || s.Volumes != nil {
		t.Errorf("empty volumes: %+v %v; want none", s, err)
	}
}

// TestParseVolumesRefuses: a bad entry is refused naming volumes[i] and
// its line, with --volume's own reason.
func TestParseVolumesRefuses(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantField string
		wantLine  int
		wantText  string
	}{
		{"system path", "volumes: [data:/etc]\n", "volumes[0]", 3, "want an absolute path under /data"},
		{"relative path", "volumes:\n  - ok\n  - data:data\n", "volumes[1]", 5, "want an absolute path"},
		{"dot dot", "volumes: ['data:/data/../etc']\n", "volumes[0]", 3, "want an absolute path"},
		{"no name", "volumes: [':/data']\n", "volumes[0]", 3, "want NAME or NAME:/path"},
		{"bad name", "volumes: ['Data:/data']\n", "volumes[0]", 3, "lowercase"},
		{"twice", "volumes: [data, 'data:/mnt/d']\n", "volumes[1]", 3, "listed twice"},
		{"not a list", "volumes: data\n", "volumes", 3, "want a list"},
		{"a mapping entry", "volumes: [{volume: data}]\n", "volumes[0]", 3, "want NAME or NAME:/path"},
		{"a number", "volumes: [7]\n", "volumes[0]", 3, "want NAME or NAME:/path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte("resources: {sku: h}\nrun: x\n" + tt.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v; want an *Error", err)
			}
			if e.Field != tt.wantField || e.Line != tt.wantLine || !strings.Contains(e.Reason, tt.wantText) {
				t.Errorf("got field %q line %d %q; want field %q line %d containing %q", e.Field, e.Line, e.Reason, tt.wantField, tt.wantLine, tt.wantText)
			}
		})
	}
}
