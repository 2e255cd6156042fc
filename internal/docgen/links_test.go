package docgen_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// outsideRefs are references to documents that are not in the repository:
// the design notes the project was planned with. Code and docs cite
// docs/architecture.md or a decision record instead. Spelled in pieces so
// this file does not cite them itself.
var outsideRefs = []string{"../" + "shared", "DESIGN" + ".md"}

// textExts are the files scanned for references: source, SQL, docs and
// configuration, not binaries or generated man pages.
var textExts = map[string]bool{".go": true, ".md": true, ".sql": true, ".yaml": true, ".yml": true,
	".json": true, ".conf": true, ".service": true, ".env": true, ".sh": true, ".txtar": true}

// repoFiles returns the repository's text files (relative paths), skipping
// .git and the generated man/ and completions/.
func repoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			switch rel {
			case ".git", "man", "completions":
				return filepath.SkipDir
			}
			return nil
		}
		if textExts[filepath.Ext(path)] || rel == "Makefile" || strings.HasPrefix(rel, "scripts"+string(filepath.Separator)) ||
			strings.HasPrefix(rel, ".ci"+string(filepath.Separator)) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found %d text files under %s; want the whole repository", len(files), repoRoot)
	}
	return files
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNoReferencesOutsideTheRepository fails when a file of the repository
// links or cites a document that is not in it (outsideRefs): readers of
// the repository cannot open it.
func TestNoReferencesOutsideTheRepository(t *testing.T) {
	for _, rel := range repoFiles(t) {
		for i, line := range strings.Split(readRepoFile(t, rel), "\n") {
			for _, ref := range outsideRefs {
				if strings.Contains(line, ref) {
					t.Errorf("%s:%d cites %s, which is not in the repository: cite docs/architecture.md or a docs/decisions record",
						rel, i+1, ref)
				}
			}
		}
	}
}

// issueRef is a comment citing an issue by number: the word issue (or
// issues), a space, digits.
var issueRef = regexp.MustCompile(`(?i)\bissues? \d+`)

// TestCodeCommentsCiteDocsNotIssues fails when Go code cites an issue
// number: issues are not in the repository, so comments cite docs, decision
// records or tests instead (CONTRIBUTING.md, "Commits and comments").
func TestCodeCommentsCiteDocsNotIssues(t *testing.T) {
	for _, rel := range repoFiles(t) {
		if filepath.Ext(rel) != ".go" {
			continue
		}
		for i, line := range strings.Split(readRepoFile(t, rel), "\n") {
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q: cite the doc, decision record or test instead", rel, i+1, m)
			}
		}
	}
}

// mdLink is the target of a Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestMarkdownLinksResolve fails when a Markdown file of the repository
// links a file, or a heading of a Markdown file, that does not exist.
func TestMarkdownLinksResolve(t *testing.T) {
	for _, rel := range repoFiles(t) {
		if filepath.Ext(rel) != ".md" {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(readRepoFile(t, rel), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := rel
			if file != "" {
				path = filepath.Join(filepath.Dir(rel), file)
			}
			if strings.HasPrefix(path, "..") {
				t.Errorf("%s links %s, outside the repository", rel, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, path)); err != nil {
				t.Errorf("%s links %s: no such file", rel, target)
				continue
			}
			if anchor != "" && filepath.Ext(path) == ".md" && !headingSlugs(readRepoFile(t, path))[anchor] {
				t.Errorf("%s links %s: %s has no heading #%s", rel, target, path, anchor)
			}
		}
	}
}

// headingSlugs returns the anchors GitHub makes of a Markdown file's
// headings: lower case, spaces to hyphens, punctuation dropped.
func headingSlugs(md string) map[string]bool {
	slugs := map[string]bool{}
	fenced := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		slugs[b.String()] = true
	}
	return slugs
}

// TestArchitectureIsLinked: the README links the architecture page and the
// contributing guide, and the architecture page links every decision
// record, so each record is found from the README in two steps.
func TestArchitectureIsLinked(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	for _, want := range []string{"](docs/architecture.md", "](CONTRIBUTING.md)"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md has no link %s…", want)
		}
	}
	arch := readRepoFile(t, filepath.Join("docs", "architecture.md"))
	records, err := filepath.Glob(filepath.Join(repoRoot, "docs", "decisions", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 {
		t.Fatal("no decision records in docs/decisions")
	}
	for _, r := range records {
		if want := "](decisions/" + filepath.Base(r) + ")"; !strings.Contains(arch, want) {
			t.Errorf("docs/architecture.md does not link docs/decisions/%s (want a link %s)", filepath.Base(r), want)
		}
	}
}
