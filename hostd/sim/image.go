package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// DefaultImageName is the base image every sim host carries; it is
// controld/catalog.DefaultImage's name, and the catalog pins the checksum
// WriteImage gives it.
const DefaultImageName = "ubuntu-24.04-gpu"

// imageSize keeps sim images small; the bytes are made from the name, so
// an image's checksum depends on its name alone.
const imageSize = 64 << 10

// ImageBytes is the content of the sim image called name.
func ImageBytes(name string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "QFI\xfb gpuaas sim base image %q\n", name)
	seed := sha256.Sum256([]byte("gpuaas sim image/" + name))
	var ctr [8]byte
	for i := uint64(0); b.Len() < imageSize; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		block := sha256.Sum256(append(seed[:], ctr[:]...))
		b.Write(block[:])
	}
	return b.Bytes()[:imageSize]
}

// ImageSHA256 is the hex SHA-256 of the sim image called name.
func ImageSHA256(name string) string {
	sum := sha256.Sum256(ImageBytes(name))
	return hex.EncodeToString(sum[:])
}

// WriteImage writes the sim image name as dir/<name>.img (replacing it
// atomically) and returns its hex SHA-256.
func WriteImage(dir, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("write sim image: bad name %q", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("write sim image: %w", err)
	}
	data := ImageBytes(name)
	if err := fsutil.WriteFile(filepath.Join(dir, name+".img"), data, 0o644, fsutil.Synced); err != nil {
		return "", fmt.Errorf("write sim image: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
