package workdir

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Names inside the stream: the files under FilesDir, the manifest beside
// it, last, so a stream cut short lacks it.
const (
	FilesDir     = "w"
	ManifestName = "manifest.sha256"
)

// Manifest hashes the plan's files: one "sha256  w/path" line per file,
// the format `sha256sum -c` reads (GNU coreutils and busybox alike).
// Its digest names the upload on the node (UploadName).
func (p *Plan) Manifest() ([]byte, error) {
	var b strings.Builder
	for _, e := range p.Entries {
		if e.Kind != KindFile {
			continue
		}
		sum, err := hashFile(filepath.Join(p.Root, filepath.FromSlash(e.Rel)))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s/%s\n", sum, FilesDir, e.Rel)
	}
	return []byte(b.String()), nil
}

func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// UploadName is the name of an upload's directory on the node: derived
// from the run's idempotency key and the manifest, so a retried run with
// the same files names the same directory (and the same job.create
// request), and one whose files changed names another.
func UploadName(idempotencyKey string, manifest []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", idempotencyKey)
	h.Write(manifest)
	return "w-" + hex.EncodeToString(h.Sum(nil))[:20]
}

// WriteTar writes the plan as a tar stream: the entries under FilesDir,
// in walk order, then the manifest. A file is sent with the size it had
// when scanned; one that changed size since is an error (the node's
// check would refuse its content anyway). Links are written as links.
func (p *Plan) WriteTar(w io.Writer, manifest []byte) error {
	tw := tar.NewWriter(w)
	for _, e := range p.Entries {
		if err := p.writeEntry(tw, e); err != nil {
			return err
		}
	}
	hdr := &tar.Header{Name: ManifestName, Mode: 0o600, Size: int64(len(manifest)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if _, err := tw.Write(manifest); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish the upload stream: %w", err)
	}
	return nil
}

func (p *Plan) writeEntry(tw *tar.Writer, e Entry) error {
	hdr := &tar.Header{Name: FilesDir + "/" + e.Rel, Mode: int64(e.Mode), ModTime: e.ModTime, Format: tar.FormatPAX}
	switch e.Kind {
	case KindDir:
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		hdr.Mode |= 0o700 // the renter must be able to unpack into it
	case KindLink:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
	case KindFile:
		hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		hdr.Mode |= 0o600
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("send %s: %w", e.Rel, err)
	}
	if e.Kind != KindFile {
		return nil
	}
	f, err := os.Open(filepath.Join(p.Root, filepath.FromSlash(e.Rel)))
	if err != nil {
		return fmt.Errorf("send %s: %w", e.Rel, err)
	}
	defer func() { _ = f.Close() }()
	n, err := io.Copy(tw, io.LimitReader(f, e.Size))
	if err != nil {
		return fmt.Errorf("send %s: %w", e.Rel, err)
	}
	if n != e.Size {
		return fmt.Errorf("send %s: it shrank from %d to %d bytes while being sent", e.Rel, e.Size, n)
	}
	return nil
}
