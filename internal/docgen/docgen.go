// Package docgen writes the generated documentation of the gpuaas command
// tree: man pages into man/ and shell completions into completions/. Run
// it with `go generate ./...`; a test fails when the committed files are
// stale.
package docgen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manDate is the date printed in man page headers. It is fixed so that the
// output depends only on the command tree.
var manDate = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Files renders every generated file, keyed by its path relative to the
// repository root.
func Files(root *cobra.Command) (map[string][]byte, error) {
	root.DisableAutoGenTag = true
	out := map[string][]byte{}
	tmp, err := os.MkdirTemp("", "gpuaas-man-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// No Title: cobra then heads each page with its own command's name
	// (GPUAAS-ALLOC-CREATE), not every page with GPUAAS.
	hdr := &doc.GenManHeader{Section: "1", Date: &manDate, Source: "gpuaas", Manual: "gpuaas manual"}
	if err := doc.GenManTree(root, hdr, tmp); err != nil {
		return nil, fmt.Errorf("man pages: %w", err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(tmp, e.Name()))
		if err != nil {
			return nil, err
		}
		out[filepath.Join("man", e.Name())] = b
	}
	completions := []struct {
		name string
		gen  func(*bytes.Buffer) error
	}{
		{"gpuaas.bash", func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) }},
		{"gpuaas.zsh", func(b *bytes.Buffer) error { return root.GenZshCompletion(b) }},
		{"gpuaas.fish", func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) }},
		{"gpuaas.ps1", func(b *bytes.Buffer) error { return root.GenPowerShellCompletionWithDesc(b) }},
	}
	for _, c := range completions {
		var b bytes.Buffer
		if err := c.gen(&b); err != nil {
			return nil, fmt.Errorf("completion %s: %w", c.name, err)
		}
		out[filepath.Join("completions", c.name)] = b.Bytes()
	}
	return out, nil
}

// Write replaces man/ and completions/ under dir with freshly generated
// files.
func Write(root *cobra.Command, dir string) error {
	files, err := Files(root)
	if err != nil {
		return err
	}
	for _, sub := range []string{"man", "completions"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
