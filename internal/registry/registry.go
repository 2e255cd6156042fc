// Package registry is gpuaas's registry work, all of it through
// go-containerregistry (never hand-written HTTP): resolving a tag to its
// digest once, verifying an image by digest, pushing an archive, and an
// in-process registry for `gpuaas dev` and tests (docs/images.md).
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Settings configure the registry controld verifies against (and hostd
// pulls from): Addr is "host:port" ("" for none); CredentialsFile, when
// set, is a JSON file {"username": …, "password": …} whose credentials
// are sent to Addr only. Loopback addresses are spoken to over HTTP,
// others over HTTPS.
type Settings struct {
	Addr            string `yaml:"addr"`
	CredentialsFile string `yaml:"credentials_file"`
}

// ErrNoRegistry is returned by a Client without a configured registry
// when a reference names none.
var ErrNoRegistry = errors.New("no registry configured")

// Client speaks to registries on behalf of controld or the CLI.
type Client struct {
	addr string
	auth authn.Authenticator
}

// New reads the credentials file, if any, and returns a Client.
func New(s Settings) (*Client, error) {
	c := &Client{addr: s.Addr, auth: authn.Anonymous}
	if s.CredentialsFile != "" {
		data, err := os.ReadFile(s.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("registry credentials: %w", err)
		}
		var cred struct {
			Username string `json:"username"`
			Password string `json:"password"`
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cred); err != nil {
			return nil, fmt.Errorf("registry credentials %s: %w", s.CredentialsFile, err)
		}
		if cred.Username == "" {
			return nil, fmt.Errorf("registry credentials %s: no username", s.CredentialsFile)
		}
		c.auth = &authn.Basic{Username: cred.Username, Password: cred.Password}
	}
	return c, nil
}

// Addr is the configured registry ("" for none).
func (c *Client) Addr() string { return c.addr }

// keychain gives the credentials to the configured registry only.
type keychain struct{ c *Client }

func (k keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.c.addr {
		return k.c.auth, nil
	}
	return authn.Anonymous, nil
}

// PullOptions are the options for pulls outside this package (hostd's
// image cache): the credentials go to the configured registry only.
func (c *Client) PullOptions() []remote.Option {
	return []remote.Option{remote.WithAuthFromKeychain(keychain{c})}
}

func (c *Client) options(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain{c})}
}

// Parse reads a reference; one that names no registry is taken to be in
// the configured one (never silently Docker Hub), and one without a tag
// or digest is refused (never silently :latest).
func (c *Client) Parse(ref string) (name.Reference, error) {
	ref = strings.TrimSpace(ref)
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.ContainsAny(last, ":@") {
		return nil, api.Errorf(api.CodeInvalidArgument, "ref %q has neither a digest nor a tag", ref).
			WithHint("give REPOSITORY@sha256:… or REPOSITORY:TAG")
	}
	r, err := name.ParseReference(ref, c.nameOptions()...)
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "ref %q: %v", ref, err).
			WithHint("give REGISTRY/REPOSITORY@sha256:… or REGISTRY/REPOSITORY:TAG")
	}
	return r, nil
}

// nameOptions default to the configured registry; without one a name
// must give its registry.
func (c *Client) nameOptions() []name.Option {
	if c.addr == "" {
		return []name.Option{name.StrictValidation}
	}
	return []name.Option{name.WithDefaultRegistry(c.addr)}
}

// Resolve returns the repository and digest ref names: a digest as it is,
// a tag by asking its registry once (the answer is what is stored).
func (c *Client) Resolve(ctx context.Context, ref string) (repo, digest string, err error) {
	r, err := c.Parse(ref)
	if err != nil {
		return "", "", err
	}
	repo = r.Context().Name()
	if d, ok := r.(name.Digest); ok {
		return repo, d.DigestStr(), nil
	}
	desc, err := remote.Head(r, c.options(ctx)...)
	if err != nil {
		return "", "", api.Errorf(api.CodeInvalidArgument, "resolve %s: %v", ref, err).
			WithHint("check the tag exists in " + r.Context().RegistryStr())
	}
	return repo, desc.Digest.String(), nil
}

// InRegistry refuses a reference outside the configured registry (and
// every reference when none is): what a user names, controld fetches, so
// users name only images of the platform's registry.
func (c *Client) InRegistry(ref string) error {
	r, err := c.Parse(ref)
	if err != nil {
		return err
	}
	if c.addr == "" {
		return api.Errorf(api.CodeInvalidArgument, "no registry is configured for project images").
			WithHint("ask an operator to configure controld's --registry")
	}
	if got := r.Context().RegistryStr(); got != c.addr {
		return api.Errorf(api.CodeInvalidArgument, "ref %q is in registry %s: a project's images come from %s", ref, got, c.addr).
			WithHint("push the image there (`gpuaas image import`), or ask an operator to publish it for the platform")
	}
	return nil
}
