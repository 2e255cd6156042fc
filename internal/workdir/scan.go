package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Limits of a workdir, checked by Scan before anything is sent, created
// or charged (docs/jobs.md, "workdir").
const (
	// MaxBytes bounds the bytes of the files sent.
	MaxBytes = 2 << 30
	// MaxEntries bounds the files, directories and links sent.
	MaxEntries = 100_000
)

// Kind is what an entry of a workdir is.
type Kind int

// Kinds of entries sent: special files (devices, sockets, FIFOs) are
// skipped with a warning.
const (
	KindFile Kind = iota
	KindDir
	KindLink
)

// Entry is one thing Scan keeps.
type Entry struct {
	// Rel is its path, slash-separated, relative to the workdir.
	Rel  string
	Kind Kind
	// Mode is its permission bits.
	Mode fs.FileMode
	// Size is a file's size when scanned.
	Size int64
	// ModTime is its modification time, kept on the node.
	ModTime time.Time
	// Target is a link's target, as it is: links are sent as links,
	// never followed.
	Target string
}

// Plan is what Scan found: the entries to send, in walk order (a
// directory before what is in it), their bytes, and warnings about what
// was left out or is sent as a link pointing outside the workdir.
type Plan struct {
	Root     string
	Entries  []Entry
	Bytes    int64
	Ignored  int
	Warnings []string
}

// Error is a workdir refused by Scan.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Scan walks the directory root, keeping what its ignore files do not
// ignore (IgnoreFiles, read in each directory as git reads .gitignore;
// .git is never kept). Links are kept as links; special files and names
// the manifest cannot hold (a newline or a backslash) are skipped with a
// warning. A root that is not a directory, or a tree over MaxBytes or
// MaxEntries, is refused (*Error) without reading further.
func Scan(root string) (*Plan, error) {
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Reason: fmt.Sprintf("%s does not exist", root)}
	case err != nil:
		return nil, &Error{Reason: fmt.Sprintf("%s: %v", root, errors.Unwrap(err))}
	case !fi.IsDir():
		return nil, &Error{Reason: fmt.Sprintf("%s is not a directory", root)}
	}
	p := &Plan{Root: root}
	if err := p.walk(&Matcher{}, ""); err != nil {
		return nil, err
	}
	return p, nil
}

// walk adds directory dir's entries (dir relative to the root, "" for
// the root itself), reading its ignore files first.
func (p *Plan) walk(m *Matcher, dir string) error {
	full := filepath.Join(p.Root, filepath.FromSlash(dir))
	for _, name := range IgnoreFiles {
		b, err := os.ReadFile(filepath.Join(full, name))
		if err == nil {
			m.Add(dir, b)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return &Error{Reason: fmt.Sprintf("read %s: %v", path.Join(dir, name), errors.Unwrap(err))}
		}
	}
	ents, err := os.ReadDir(full)
	if err != nil {
		return &Error{Reason: fmt.Sprintf("read %s: %v", full, errors.Unwrap(err))}
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, de := range ents {
		rel := path.Join(dir, de.Name())
		if de.Name() == ".git" {
			p.Ignored++
			continue
		}
		if strings.ContainsAny(de.Name(), "\n\\") {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%q skipped: a name with a newline or a backslash is not sent", rel))
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return &Error{Reason: fmt.Sprintf("%s: %v", rel, errors.Unwrap(err))}
		}
		t := fi.Mode().Type()
		if m.Ignored(rel, t.IsDir()) {
			p.Ignored++
			continue
		}
		e := Entry{Rel: rel, Mode: fi.Mode().Perm(), ModTime: fi.ModTime()}
		switch {
		case t.IsDir():
			e.Kind = KindDir
		case t.IsRegular():
			e.Kind, e.Size = KindFile, fi.Size()
		case t&fs.ModeSymlink != 0:
			e.Kind = KindLink
			if e.Target, err = os.Readlink(filepath.Join(full, de.Name())); err != nil {
				return &Error{Reason: fmt.Sprintf("%s: %v", rel, errors.Unwrap(err))}
			}
			if pointsOutside(rel, e.Target) {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s is a link to %s, outside the workdir: sent as a link, not followed", rel, e.Target))
			}
		default:
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s skipped: a special file (%s)", rel, t))
			continue
		}
		p.Entries = append(p.Entries, e)
		p.Bytes += e.Size
		if p.Bytes > MaxBytes {
			return &Error{Reason: fmt.Sprintf("more than %s of files to upload (at most %s): ignore what the job does not need in .gpuaasignore",
				humanBytes(p.Bytes), humanBytes(MaxBytes))}
		}
		if len(p.Entries) > MaxEntries {
			return &Error{Reason: fmt.Sprintf("more than %d files and directories to upload (at most %d): ignore what the job does not need in .gpuaasignore",
				MaxEntries, MaxEntries)}
		}
		if e.Kind == KindDir {
			if err := p.walk(m, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// pointsOutside reports whether a link at rel with target leaves the
// workdir (absolute, or climbing above it).
func pointsOutside(rel, target string) bool {
	if path.IsAbs(target) || filepath.IsAbs(target) {
		return true
	}
	joined := path.Join(path.Dir(rel), target)
	return joined == ".." || strings.HasPrefix(joined, "../")
}

// humanBytes prints n in the largest binary unit that keeps it ≥ 1.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
