package open

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdOpen(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *Options
	cmd := NewCmdOpen(f, func(_ context.Context, o *Options) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "--print", "https://8888-a-7k2mzq4xv9cd.localhost:8443/lab?x=1"); err != nil {
		t.Fatal(err)
	}
	if !got.Print || got.URL != "https://8888-a-7k2mzq4xv9cd.localhost:8443/lab?x=1" {
		t.Fatalf("options %+v", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdOpen(f, nil)), "URL")
	for _, bad := range []string{"http://8888-a-7k2mzq4xv9cd.localhost/", "https://example.com/", "https://80-a-7k2mzq4xv9cd.localhost/"} {
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdOpen(f, nil), bad), "URL")
	}
}

func TestSplitURL(t *testing.T) {
	tests := []struct{ url, label, path string }{
		{"https://8888-a-1.localhost:8443", "8888-a-1", "/"},
		{"https://8888-a-1.apps.example.com/lab/tree?token=x", "8888-a-1", "/lab/tree?token=x"},
	}
	for _, tt := range tests {
		label, path, err := SplitURL(tt.url)
		if err != nil || label != tt.label || path != tt.path {
			t.Errorf("%s: got %q %q %v; want %q %q", tt.url, label, path, err, tt.label, tt.path)
		}
	}
}
