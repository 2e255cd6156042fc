package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Server is an in-process OCI registry (go-containerregistry's) on
// loopback, for `gpuaas dev` and tests. Blobs are files under a directory
// (BlobPath); manifests live in memory, so a restart forgets them.
type Server struct {
	addr string
	dir  string
	srv  *http.Server
}

// Serve starts a registry on addr ("127.0.0.1:0" for any port) keeping its
// blobs under dir.
func Serve(addr, dir string) (*Server, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	s := &Server{addr: ln.Addr().String(), dir: dir}
	s.srv = &http.Server{Handler: ggcr.New(ggcr.WithBlobHandler(fileBlobs{dir}), ggcr.Logger(log.New(io.Discard, "", 0)))}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is "127.0.0.1:port", what references start with.
func (s *Server) Addr() string { return s.addr }

// BlobPath is the file a blob is kept in (tests change one to play a
// registry whose storage went bad).
func (s *Server) BlobPath(digest string) (string, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.dir, h.Algorithm, h.Hex), nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Shutdown(context.Background()) }

// fileBlobs keeps blobs as files and serves them as they are: it has no
// Stat, so the registry does not re-hash what it serves, as a registry
// whose storage was altered behind its back does not.
type fileBlobs struct{ dir string }

func (b fileBlobs) path(h v1.Hash) string { return filepath.Join(b.dir, h.Algorithm, h.Hex) }

func (b fileBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(b.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ggcr.ErrNotFound
	}
	return f, err
}

func (b fileBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	f, err := os.CreateTemp(b.dir, "upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), b.path(h))
}
