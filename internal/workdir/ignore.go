// Package workdir turns a job.yaml's workdir into what reaches the node:
// the files a walk keeps (ignore files honoured the way git reads
// .gitignore, .git never), a tar stream of them with a sha256 manifest,
// and the shell script that unpacks and checks it there
// (docs/decisions/0027-workdir-upload.md).
package workdir

import (
	"bufio"
	"bytes"
	"path"
	"strings"
)

// IgnoreFiles are the files read in every directory of a workdir, in this
// order: a .gpuaasignore's rules come after the .gitignore's of the same
// directory, so it can re-include (!name) what git ignores.
var IgnoreFiles = []string{".gitignore", ".gpuaasignore"}

// rule is one pattern line of an ignore file, as gitignore(5) reads it.
type rule struct {
	base     string   // the directory of its file, relative to the root ("" at the root)
	segments []string // the pattern split at '/'; "**" stands for any number of directories
	anchored bool     // it had a '/' at its start or in its middle: matched from base, not at any depth
	negate   bool     // a leading '!': re-includes what an earlier rule ignored
	dirOnly  bool     // a trailing '/': matches directories only
}

// Matcher holds the rules of the ignore files read so far. Later rules
// win over earlier ones, and a deeper directory's files are added after
// its parents', as git does.
type Matcher struct {
	rules []rule
}

// Add reads the rules of one ignore file found in directory base
// (slash-separated, relative to the workdir; "" is the workdir itself).
func (m *Matcher) Add(base string, content []byte) {
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if r, ok := parseRule(base, sc.Text()); ok {
			m.rules = append(m.rules, r)
		}
	}
}

// parseRule reads one line; ok is false for blank lines and comments.
func parseRule(base, line string) (rule, bool) {
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return rule{}, false
	}
	r := rule{base: base}
	switch {
	case strings.HasPrefix(line, "!"):
		r.negate, line = true, line[1:]
	case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly, line = true, strings.TrimRight(line, "/")
	}
	if line == "" {
		return rule{}, false
	}
	if strings.Contains(line, "/") {
		r.anchored, line = true, strings.TrimPrefix(line, "/")
	}
	r.segments = strings.Split(line, "/")
	for i, s := range r.segments {
		r.segments[i] = toPathMatch(s)
	}
	// "**/foo" at the start matches foo at any depth: the same as an
	// unanchored "foo" when nothing else follows.
	if r.anchored && len(r.segments) == 2 && r.segments[0] == "**" {
		r.anchored, r.segments = false, r.segments[1:]
	}
	return r, true
}

// trimTrailingSpaces drops trailing spaces not escaped with a backslash.
func trimTrailingSpaces(s string) string {
	for strings.HasSuffix(s, " ") && !strings.HasSuffix(s, `\ `) {
		s = s[:len(s)-1]
	}
	return s
}

// toPathMatch turns a gitignore glob segment into path.Match's syntax:
// gitignore's negated class "[!...]" is path.Match's "[^...]".
func toPathMatch(seg string) string {
	return strings.ReplaceAll(seg, "[!", "[^")
}

// Ignored reports whether rel (slash-separated, relative to the workdir)
// is ignored; isDir says whether it is a directory. The last rule that
// matches decides. A file inside an ignored directory is never asked
// about: the walk does not enter it, which is git's "a file cannot be
// re-included when a parent directory is excluded".
func (m *Matcher) Ignored(rel string, isDir bool) bool {
	ignored := false
	for i := range m.rules {
		r := &m.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		if r.matches(rel) {
			ignored = !r.negate
		}
	}
	return ignored
}

func (r *rule) matches(rel string) bool {
	if r.base != "" {
		if !strings.HasPrefix(rel, r.base+"/") {
			return false
		}
		rel = rel[len(r.base)+1:]
	}
	if !r.anchored {
		return len(r.segments) == 1 && globMatch(r.segments[0], path.Base(rel))
	}
	return matchSegments(r.segments, strings.Split(rel, "/"))
}

// matchSegments matches path segments against pattern segments, "**"
// standing for zero or more whole segments (a trailing "**" for one or
// more: "dir/**" matches what is inside dir, not dir itself).
func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return len(segs) > 0
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegments(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 || !globMatch(pat[0], segs[0]) {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// globMatch is path.Match within one segment; a malformed pattern
// matches nothing (git ignores such a pattern too).
func globMatch(pattern, name string) bool {
	if pattern == "**" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
