package guestimage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The minimal image is made of Debian packages fetched with
// `apt-get download` (no root: it writes into the current directory) and
// unpacked with `dpkg-deb -x` (no root, no maintainer scripts, no chroot).
// Packages go to the same apt/ directory of the cache that debootstrap
// fills for the production image; both name files name_version_arch.deb.

// fetchDebs makes sure dir holds the .deb of each package (the version
// apt's lists name) and returns their paths by package name. apt-get
// download skips a file that is already there with the right digest.
func fetchDebs(ctx context.Context, log io.Writer, dir string, pkgs []string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fetch packages: %w", err)
	}
	// --print-uris names the files without fetching:
	// 'URI' name_version_arch.deb size SHA256:...
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("apt-get download --print-uris %s: %w (are apt's lists current? apt-get update)", strings.Join(pkgs, " "), err)
	}
	files := map[string]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasSuffix(f[1], ".deb") {
			continue
		}
		name, _, _ := strings.Cut(f[1], "_")
		files[name] = filepath.Join(dir, f[1])
	}
	var missing []string
	for _, p := range pkgs {
		file, ok := files[p]
		if !ok {
			// apt-get prints nothing for a file already in dir.
			var err error
			if file, err = cachedDeb(ctx, dir, p); err != nil {
				return nil, err
			}
			files[p] = file
		}
		if _, err := os.Stat(file); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		if err := runToolIn(ctx, log, dir, "apt-get", append([]string{"download"}, missing...)...); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// cachedDeb finds the .deb of pkg's candidate version in dir.
func cachedDeb(ctx context.Context, dir, pkg string) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "policy", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache policy %s: %w", pkg, err)
	}
	version := ""
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			version = strings.TrimSpace(v)
		}
	}
	if version == "" || version == "(none)" {
		return "", fmt.Errorf("fetch packages: apt knows no candidate version of %s (apt-get update?)", pkg)
	}
	// File names spell the epoch's colon as %3a.
	matches, _ := filepath.Glob(filepath.Join(dir, pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_*.deb"))
	if len(matches) != 1 {
		return "", fmt.Errorf("fetch packages: apt-get names no file for %s %s and %s has %d", pkg, version, dir, len(matches))
	}
	return matches[0], nil
}

// kernelPackage resolves the linux-image-cloud-amd64 metapackage (in
// debs) to the versioned kernel package it depends on.
func kernelPackage(ctx context.Context, meta string) (string, error) {
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-f", meta, "Depends").Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-deb -f %s Depends: %w", meta, err)
	}
	for _, dep := range strings.Split(string(out), ",") {
		for _, alt := range strings.Split(dep, "|") {
			name := strings.Fields(alt)
			if len(name) > 0 && strings.HasPrefix(name[0], "linux-image-") {
				return name[0], nil
			}
		}
	}
	return "", fmt.Errorf("%s depends on no linux-image-* package (Depends: %s)", filepath.Base(meta), strings.TrimSpace(string(out)))
}

// unpackDebs extracts every .deb into root with dpkg-deb -x.
func unpackDebs(ctx context.Context, log io.Writer, root string, debs map[string]string) error {
	for _, deb := range debs {
		if err := runTool(ctx, log, "dpkg-deb", "-x", deb, root); err != nil {
			return err
		}
	}
	return nil
}

// runToolIn is runTool in directory dir.
func runToolIn(ctx context.Context, log io.Writer, dir, name string, args ...string) error {
	var tail tailBuffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, tail.String())
	}
	return nil
}
