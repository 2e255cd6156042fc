// Package ca owns ssh_ca_keys: the keys of controld's three SSH
// certificate authorities (user, host and internal; see internal/sshcert).
//
// Each CA has one active key, which signs, and trusts every key that is not
// retired, so a rotation has an overlap in which certificates from the old
// and the new key both verify. The state lives in Postgres only: every
// Load reads it (one small indexed query), so a rotation or a retirement on
// any replica takes effect on all of them at their next request, without a
// restart. Decrypted private keys are cached in memory by fingerprint,
// since a key's bytes never change once created.
//
// Private keys are stored as OpenSSH PEM blocks in a table that only
// controld's database role may read (like controld_keys); with Config.KEK
// they are also sealed at rest with AES-256-GCM (the key's fingerprint as
// associated data), so a database dump alone does not give away the CAs.
// The KEK is a random key, not a passphrase: no KDF runs per key.
package ca

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Names are the CAs controld runs, in the order they are listed.
var Names = []string{api.CAUser, api.CAHost, api.CAInternal}

// Config configures the CA service.
type Config struct {
	// KEK, when set, is the 32-byte key-encryption key that seals private
	// keys created from now on, and that sealed keys need to load. Keys
	// stored without it still load (rotate to replace them).
	KEK []byte
	Now func() time.Time
	Log *slog.Logger
}

// CheckAndSetDefaults fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if len(c.KEK) != 0 && len(c.KEK) != KEKSize {
		return errKEKSize
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Service loads the CAs from the database and changes their keys.
type Service struct {
	cfg Config

	// mu protects signers: decrypted private keys by fingerprint.
	mu      sync.Mutex
	signers map[string]ed25519.PrivateKey
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, signers: map[string]ed25519.PrivateKey{}}, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Set is every CA as loaded at one moment.
type Set struct {
	User, Host, Internal *sshcert.Authority
}

// Get returns the named CA, or nil for an unknown name.
func (s *Set) Get(name string) *sshcert.Authority {
	switch name {
	case api.CAUser:
		return s.User
	case api.CAHost:
		return s.Host
	case api.CAInternal:
		return s.Internal
	}
	return nil
}

// ValidName checks a CA name from a request.
func ValidName(name string) error {
	if !slices.Contains(Names, name) {
		return api.Errorf(api.CodeInvalidArgument, "unknown CA %q", name).WithHint("the CAs are user, host and internal")
	}
	return nil
}

// Init gives every CA a key if it has none: on first start, or after a
// database restore without keys. Replicas starting together race on the
// one-active-key-per-CA index and all end up with the key that won.
func (s *Service) Init(ctx context.Context, q store.Querier) error {
	for _, name := range Names {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ssh_ca_keys WHERE ca = $1 AND active)`, name).
			Scan(&exists); err != nil {
			return fmt.Errorf("init %s CA: %w", name, err)
		}
		if exists {
			continue
		}
		k, err := s.newKey(name)
		if err != nil {
			return err
		}
		tag, err := q.Exec(ctx, `INSERT INTO ssh_ca_keys (id, ca, public_key, private_key, active, created_at, activated_at)
			VALUES ($1,$2,$3,$4,true,$5,$5) ON CONFLICT (ca) WHERE active DO NOTHING`,
			k.ID, name, k.PublicKey, k.pem, s.now())
		if err != nil {
			return fmt.Errorf("init %s CA: %w", name, err)
		}
		if tag.RowsAffected() == 1 {
			s.mu.Lock()
			s.signers[k.ID] = k.priv
			s.mu.Unlock()
			s.cfg.Log.Info("created SSH CA key", "ca", name, "key", k.ID)
		}
	}
	return nil
}

// Load reads every CA's trusted keys and its signing key.
func (s *Service) Load(ctx context.Context, q store.Querier) (*Set, error) {
	rows, err := q.Query(ctx, `SELECT id, ca, public_key, active FROM ssh_ca_keys WHERE retired_at IS NULL
		ORDER BY ca, active DESC, activated_at DESC NULLS LAST, created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("load CAs: %w", err)
	}
	type row struct {
		id, ca, pub string
		active      bool
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var k row
		return k, r.Scan(&k.id, &k.ca, &k.pub, &k.active)
	})
	if err != nil {
		return nil, fmt.Errorf("load CAs: %w", err)
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.id
	}
	s.forgetOthers(ids)
	set := &Set{}
	for _, name := range Names {
		var active string
		var trusted []ssh.PublicKey
		for _, k := range keys {
			if k.ca != name {
				continue
			}
			if k.active {
				active = k.id
				continue
			}
			pub, err := parsePublic(k.pub)
			if err != nil {
				return nil, fmt.Errorf("load %s CA key %s: %w", name, k.id, err)
			}
			trusted = append(trusted, pub)
		}
		if active == "" {
			return nil, fmt.Errorf("load %s CA: no active key", name)
		}
		priv, err := s.signer(ctx, q, active)
		if err != nil {
			return nil, err
		}
		a, err := sshcert.New(name, priv, trusted...)
		if err != nil {
			return nil, fmt.Errorf("load %s CA: %w", name, err)
		}
		switch name {
		case api.CAUser:
			set.User = a
		case api.CAHost:
			set.Host = a
		case api.CAInternal:
			set.Internal = a
		}
	}
	return set, nil
}

// Authority loads one CA.
func (s *Service) Authority(ctx context.Context, q store.Querier, name string) (*sshcert.Authority, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	set, err := s.Load(ctx, q)
	if err != nil {
		return nil, err
	}
	return set.Get(name), nil
}

// signer returns the decrypted private key with fingerprint id.
func (s *Service) signer(ctx context.Context, q store.Querier, id string) (ed25519.PrivateKey, error) {
	s.mu.Lock()
	k, ok := s.signers[id]
	s.mu.Unlock()
	if ok {
		return k, nil
	}
	var pemBytes []byte
	if err := q.QueryRow(ctx, `SELECT private_key FROM ssh_ca_keys WHERE id = $1 AND retired_at IS NULL`, id).
		Scan(&pemBytes); err != nil {
		return nil, fmt.Errorf("load CA key %s: %w", id, err)
	}
	k, err := s.parsePrivate(id, pemBytes)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.signers[id] = k
	s.mu.Unlock()
	return k, nil
}

// forgetOthers drops cached private keys that are no longer trusted, so a
// retired key does not stay in memory.
func (s *Service) forgetOthers(trusted []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.signers {
		if !slices.Contains(trusted, id) {
			delete(s.signers, id)
		}
	}
}

// newKey is a fresh CA key, ready to store.
type newKey struct {
	api.CAKey
	priv ed25519.PrivateKey
	pem  []byte
}

func (s *Service) newKey(name string) (newKey, error) {
	priv, err := sshcert.GenerateKey()
	if err != nil {
		return newKey{}, fmt.Errorf("new %s CA key: %w", name, err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return newKey{}, fmt.Errorf("new %s CA key: %w", name, err)
	}
	pemBytes, err := sshcert.MarshalPrivateKey(priv, "gpuaas-"+name+"-ca", nil)
	if err != nil {
		return newKey{}, fmt.Errorf("new %s CA key: %w", name, err)
	}
	pub := signer.PublicKey()
	id := ssh.FingerprintSHA256(pub)
	stored, err := seal(s.cfg.KEK, id, pemBytes)
	if err != nil {
		return newKey{}, fmt.Errorf("new %s CA key: %w", name, err)
	}
	return newKey{
		CAKey: api.CAKey{CA: name, ID: id, PublicKey: marshalPublic(pub)},
		priv:  priv,
		pem:   stored,
	}, nil
}

func marshalPublic(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func parsePublic(line string) (ssh.PublicKey, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	return k, err
}
