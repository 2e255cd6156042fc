package appspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/appspec"
)

// TestDocsManifestsParse parses every ```yaml block of docs/apps.md: the
// vLLM and Ollama manifests, pinned by digest, and the dev example.
func TestDocsManifestsParse(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "apps.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, block := range strings.Split(string(data), "```yaml\n")[1:] {
		body, _, ok := strings.Cut(block, "```")
		if !ok {
			t.Fatal("an unterminated yaml block")
		}
		app, err := appspec.Parse([]byte(body))
		if err != nil {
			t.Fatalf("docs/apps.md manifest:\n%s\n%v", body, err)
		}
		names = append(names, app.Name)
		if app.Name == "vllm" || app.Name == "ollama" {
			if !app.IsRef() {
				t.Errorf("%s: image %s is not pinned by digest", app.Name, app.Image)
			}
		}
	}
	if got := strings.Join(names, " "); got != "vllm ollama hello" {
		t.Fatalf("manifests in docs/apps.md: %s; want vllm ollama hello", got)
	}
}
