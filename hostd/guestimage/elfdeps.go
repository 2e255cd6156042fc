package guestimage

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// What the minimal image takes from the unpacked packages is found by
// reading ELF files, not by listing it: the shared libraries a program
// needs (DT_NEEDED, recursively, plus its interpreter) and the kernel
// modules a module needs (depends= in its .modinfo section; the package
// has no modules.dep, depmod writes that at install time).

// libDirs are where the dynamic loader looks for libraries (Debian's
// multiarch directories first).
var libDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib", "lib64"}

// resolveInRoot follows symbolic links of p (a path in the guest) inside
// root, absolute targets taken as relative to root, and returns the guest
// path of the file they end at.
func resolveInRoot(root, p string) (string, error) {
	p = path.Clean("/" + p)
	for range 40 {
		// Resolve the directories first, then the last element.
		dir, base := path.Split(p)
		if dir != "/" {
			d, err := resolveInRoot(root, strings.TrimSuffix(dir, "/"))
			if err != nil {
				return "", err
			}
			p = path.Join(d, base)
		}
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		p = path.Clean(target)
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

// neededFiles returns the guest paths of programs and, recursively, of
// every shared library and interpreter they load, resolved in root. Each
// path is what the loader asks for (the SONAME); the caller stores the
// content of the resolved file there.
func neededFiles(root string, programs []string) (map[string]string, error) {
	out := map[string]string{} // guest path -> resolved guest path
	queue := append([]string(nil), programs...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if _, done := out[p]; done {
			continue
		}
		real, err := resolveInRoot(root, p)
		if err != nil {
			return nil, fmt.Errorf("find %s in the packages: %w", p, err)
		}
		out[p] = real
		f, err := elf.Open(filepath.Join(root, real))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		libs, err := f.ImportedLibraries()
		interp := ""
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b := make([]byte, prog.Filesz)
				if _, rerr := prog.ReadAt(b, 0); rerr == nil {
					interp = string(bytes.TrimRight(b, "\x00"))
				}
			}
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s's libraries: %w", p, err)
		}
		if interp != "" {
			queue = append(queue, interp)
		}
	libs:
		for _, lib := range libs {
			for _, d := range libDirs {
				cand := "/" + d + "/" + lib
				if _, err := resolveInRoot(root, cand); err == nil {
					queue = append(queue, cand)
					continue libs
				}
			}
			return nil, fmt.Errorf("%s needs %s, which none of the packages has: add its package to MinimalPackages", p, lib)
		}
	}
	return out, nil
}

// moduleName is the kernel's spelling of a module's name: '-' and '_'
// are the same to it.
func moduleName(s string) string {
	s = strings.TrimSuffix(filepath.Base(s), ".ko")
	return strings.ReplaceAll(s, "-", "_")
}

// moduleOrder returns the module files (relative to moddir) needed for
// the modules named, dependencies first, each once.
func moduleOrder(moddir string, names []string) ([]string, error) {
	index := map[string]string{}
	err := filepath.WalkDir(moddir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(moddir, p)
			index[moduleName(p)] = rel
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index kernel modules: %w", err)
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, by string) error
	visit = func(name, by string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("kernel modules: dependency cycle through %s", name)
		case 2:
			return nil
		}
		rel, ok := index[name]
		if !ok {
			if by == "" {
				return fmt.Errorf("kernel module %s is not in the kernel package (built in? then drop it from MinimalModules)", name)
			}
			return fmt.Errorf("kernel module %s (needed by %s) is not in the kernel package", name, by)
		}
		state[name] = 1
		deps, err := moduleDepends(filepath.Join(moddir, rel))
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, rel)
		return nil
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		if err := visit(moduleName(n), ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleDepends reads the depends= field of a module's .modinfo section.
func moduleDepends(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", file, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section (compressed? unpack .ko.xz first)", file)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", file, err)
	}
	for _, field := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(field, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, moduleName(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}
