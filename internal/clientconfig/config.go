// Package clientconfig reads and writes the CLI's config file: one or more named
// contexts (a server plus the credentials and default project used with
// it) and which of them is current.
//
// The file model (Config) never holds environment or flag overrides, so
// saving it after a command ran with GPUAAS_TOKEN set does not persist that
// token. Overrides are applied when resolving the Active context.
package clientconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// FileName is the name of the config file inside the config directory.
const FileName = "config.json"

// DefaultServer is the NATS URL used when neither the context nor the
// environment names one: where `gpuaas dev` listens by default.
const DefaultServer = "nats://127.0.0.1:4222"

// DefaultContextName names the context created on first use when the file
// has none.
const DefaultContextName = "default"

// Config is the content of config.json.
type Config struct {
	CurrentContext string             `json:"current_context,omitempty"`
	Contexts       map[string]Context `json:"contexts"`

	path string
}

// Context is a server and what the CLI uses to talk to it.
type Context struct {
	Server         string    `json:"server,omitempty"`
	User           string    `json:"user,omitempty"`
	UserID         string    `json:"user_id,omitempty"`
	Token          string    `json:"token,omitempty"`
	TokenExpiresAt time.Time `json:"token_expires_at,omitzero"`
	Project        string    `json:"project,omitempty"`
	// Gateway overrides the SSH gateway address ("host:port") controld
	// publishes; set with `gpuaas ssh-config --gateway`.
	Gateway string `json:"gateway,omitempty"`
	// NATSCA is the PEM of the CA(s) the server's TLS certificate must
	// chain to (`gpuaas context add --ca FILE`).
	NATSCA string `json:"nats_ca,omitempty"`
	// NATSInsecurePlaintext allows a plaintext connection to a server that
	// is not on this machine.
	NATSInsecurePlaintext bool `json:"nats_insecure_plaintext,omitempty"`
	// Trust is what the context pinned about its server (internal/trust).
	Trust *Trust `json:"trust,omitempty"`
}

// Trust is what a context learned about its server at the first login
// (or was given by `gpuaas context add --server-key`), and accepts changes
// to only when they come signed by the pinned server key.
type Trust struct {
	// ServerKey is controld's server key, authorized_keys form; a SHA256
	// fingerprint alone when given by `context add --server-key` and not
	// yet confirmed by a bundle.
	ServerKey string `json:"server_key"`
	// HostCAs are the gateway's host CA keys, authorized_keys form.
	HostCAs []string `json:"host_cas,omitempty"`
	// RetiredHostCAs are fingerprints of host CA keys retired for good.
	RetiredHostCAs []string `json:"retired_host_cas,omitempty"`
	// Gateway is the gateway address the server vouched for ("host:port").
	Gateway string `json:"gateway,omitempty"`
	// IssuedAt is when the server signed the bundle pinned last.
	IssuedAt time.Time `json:"issued_at,omitzero"`
	// PinnedAt is when the server key was first pinned.
	PinnedAt time.Time `json:"pinned_at,omitzero"`
}

// Load reads dir/config.json. A missing file is an empty config that Save
// will create.
func Load(dir string) (*Config, error) {
	path := filepath.Join(dir, FileName)
	c := &Config{Contexts: map[string]Context{}, path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	if c.Contexts == nil {
		c.Contexts = map[string]Context{}
	}
	return c, nil
}

// Path is where Save writes.
func (c *Config) Path() string { return c.path }

// Context returns the context called name.
func (c *Config) Context(name string) (Context, bool) {
	ctx, ok := c.Contexts[name]
	return ctx, ok
}

// SetContext creates or replaces the context called name. The first
// context set in an empty config becomes the current one.
func (c *Config) SetContext(name string, ctx Context) {
	c.Contexts[name] = ctx
	if c.CurrentContext == "" {
		c.CurrentContext = name
	}
}

// UpdateContext applies fn to the context called name, creating it when
// missing, and stores the result.
func (c *Config) UpdateContext(name string, fn func(*Context)) {
	ctx := c.Contexts[name]
	fn(&ctx)
	c.SetContext(name, ctx)
}

// UpdateActive applies fn to the stored context behind a, creating it on
// a's server when the file has no context by that name.
func (c *Config) UpdateActive(a Active, fn func(*Context)) {
	c.UpdateContext(a.Name, func(ctx *Context) {
		if ctx.Server == "" {
			ctx.Server = a.Server
		}
		fn(ctx)
	})
}

// UseContext makes name the current context.
func (c *Config) UseContext(name string) error {
	if _, ok := c.Contexts[name]; !ok {
		return fmt.Errorf("no context %q in %s", name, c.path)
	}
	c.CurrentContext = name
	return nil
}

// RemoveContext deletes the context called name; when it was current, no
// context is current afterwards.
func (c *Config) RemoveContext(name string) error {
	if _, ok := c.Contexts[name]; !ok {
		return fmt.Errorf("no context %q in %s", name, c.path)
	}
	delete(c.Contexts, name)
	if c.CurrentContext == name {
		c.CurrentContext = ""
	}
	return nil
}

// ContextNames lists the contexts, sorted.
func (c *Config) ContextNames() []string {
	names := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Save writes the config atomically: a private temporary file in the same
// directory, synced, then renamed over config.json. The directory is
// created 0700 and the file is 0600, since it holds session tokens.
func (c *Config) Save() error {
	if c.path == "" {
		return errors.New("save config: no path (use Load)")
	}
	dir := filepath.Dir(c.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(dir, "."+FileName+".tmp-*") // created 0600
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save config: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	return nil
}
