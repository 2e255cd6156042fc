package bus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// Account names of the NATS trust model (see docs/architecture.md, "Trust model").
const (
	// AppAccount holds every gpuaas connection: controld, sshgate, hostd
	// and users, each with only its own permissions.
	AppAccount = "GPUAAS"
	// SystemAccount is NATS's system account: controld uses it to close
	// revoked users' connections, operators to monitor the servers.
	SystemAccount = "SYS"
)

// Key files in a keys directory (gpuaas ops nats-setup writes them).
const (
	IssuerKeyFile   = "callout-issuer.nk"
	XKeyFile        = "callout-xkey.xk"
	ControldKeyFile = "controld.nk"
	APIKeyFile      = "controld-api.nk"
	SystemKeyFile   = "controld-sys.nk"
)

// Keys are the secrets of a deployment's NATS trust model, all held by
// controld. The NATS servers' configuration carries only their public
// halves (see ServerAuth).
type Keys struct {
	// Issuer is the account key that signs the user JWTs the auth
	// callout issues; the servers accept callout responses signed by it.
	Issuer nkeys.KeyPair
	// XKey is the curve key the servers encrypt callout requests to and
	// controld encrypts its responses with.
	XKey nkeys.KeyPair
	// Controld is controld's user in AppAccount: it bypasses the callout
	// (it answers it) and has every permission.
	Controld nkeys.KeyPair
	// API is controld's user in AppAccount that serves the API and the
	// nodes' reports: it bypasses the callout too, and may publish only to
	// inboxes (ServerAuth.Config), so that a request's reply subject — the
	// requester's choice — can make it write nowhere else.
	API nkeys.KeyPair
	// System is controld's user in SystemAccount (kicking connections).
	System nkeys.KeyPair
}

// GenerateKeys makes a fresh set of keys.
func GenerateKeys() (*Keys, error) {
	var k Keys
	var err error
	if k.Issuer, err = nkeys.CreateAccount(); err != nil {
		return nil, fmt.Errorf("issuer key: %w", err)
	}
	if k.XKey, err = nkeys.CreateCurveKeys(); err != nil {
		return nil, fmt.Errorf("xkey: %w", err)
	}
	if k.Controld, err = nkeys.CreateUser(); err != nil {
		return nil, fmt.Errorf("controld key: %w", err)
	}
	if k.API, err = nkeys.CreateUser(); err != nil {
		return nil, fmt.Errorf("controld api key: %w", err)
	}
	if k.System, err = nkeys.CreateUser(); err != nil {
		return nil, fmt.Errorf("system key: %w", err)
	}
	return &k, nil
}

func (k *Keys) files() []struct {
	name   string
	kp     *nkeys.KeyPair
	prefix nkeys.PrefixByte
} {
	return []struct {
		name   string
		kp     *nkeys.KeyPair
		prefix nkeys.PrefixByte
	}{
		{IssuerKeyFile, &k.Issuer, nkeys.PrefixByteAccount},
		{XKeyFile, &k.XKey, nkeys.PrefixByteCurve},
		{ControldKeyFile, &k.Controld, nkeys.PrefixByteUser},
		{APIKeyFile, &k.API, nkeys.PrefixByteUser},
		{SystemKeyFile, &k.System, nkeys.PrefixByteUser},
	}
}

// Save writes the keys' seeds into dir (made 0700 if absent), each file
// 0600. Existing files are replaced atomically.
func (k *Keys) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keys dir: %w", err)
	}
	for _, f := range k.files() {
		seed, err := (*f.kp).Seed()
		if err != nil {
			return fmt.Errorf("seed of %s: %w", f.name, err)
		}
		if err := fsutil.WriteFile(filepath.Join(dir, f.name), append(seed, '\n'), 0o600, fsutil.Durable); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}

// ErrNoKeys is returned by LoadKeys when dir holds no keys at all.
var ErrNoKeys = errors.New("no NATS keys")

// LoadKeys reads the keys Save wrote.
func LoadKeys(dir string) (*Keys, error) {
	var k Keys
	missing := 0
	for _, f := range k.files() {
		kp, err := ReadSeedFile(filepath.Join(dir, f.name), f.prefix)
		if errors.Is(err, os.ErrNotExist) {
			missing++
			continue
		}
		if err != nil {
			return nil, err
		}
		*f.kp = kp
	}
	switch missing {
	case 0:
		return &k, nil
	case len(k.files()):
		return nil, fmt.Errorf("%w in %s (create them with `gpuaas ops nats-setup`)", ErrNoKeys, dir)
	}
	return nil, fmt.Errorf("load NATS keys: %s holds only some of %s, %s, %s, %s, %s "+
		"(keys made before controld's API connection had its own key lack %s: run `gpuaas ops nats-setup` again and update the servers' configuration)",
		dir, IssuerKeyFile, XKeyFile, ControldKeyFile, APIKeyFile, SystemKeyFile, APIKeyFile)
}

// LoadOrCreateKeys loads the keys in dir, generating and saving them on
// first use (gpuaas dev).
func LoadOrCreateKeys(dir string) (*Keys, error) {
	k, err := LoadKeys(dir)
	if !errors.Is(err, ErrNoKeys) {
		return k, err
	}
	if k, err = GenerateKeys(); err != nil {
		return nil, err
	}
	return k, k.Save(dir)
}

// ReadSeedFile reads an nkey seed of the given kind from path (the file
// may hold other lines, as natscli's and nsc's key files do).
func ReadSeedFile(path string, want nkeys.PrefixByte) (nkeys.KeyPair, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "S") {
			continue
		}
		kp, err := nkeys.FromSeed([]byte(line))
		if err != nil {
			continue
		}
		pub, _ := kp.PublicKey()
		if nkeys.Prefix(pub) != want {
			return nil, fmt.Errorf("read key %s: it is a %s key, want %s", path, nkeys.Prefix(pub), want)
		}
		return kp, nil
	}
	return nil, fmt.Errorf("read key %s: no nkey seed in it", path)
}

// ServerAuth is the public half of Keys: what a NATS server's
// configuration needs.
type ServerAuth struct {
	Issuer   string // account public key
	XKey     string // curve public key
	Controld string // user public key
	API      string // user public key
	System   string // user public key
}

// Public returns the public halves of k.
func (k *Keys) Public() ServerAuth {
	var a ServerAuth
	a.Issuer, _ = k.Issuer.PublicKey()
	a.XKey, _ = k.XKey.PublicKey()
	a.Controld, _ = k.Controld.PublicKey()
	a.API, _ = k.API.PublicKey()
	a.System, _ = k.System.PublicKey()
	return a
}

// Config is the accounts and authorization part of a nats-server
// configuration file for this trust model. `gpuaas dev` runs its embedded
// server from exactly this text; operators include it in theirs.
func (a ServerAuth) Config() string {
	return fmt.Sprintf(`# gpuaas trust model: every connection but controld's is decided by
# controld's auth callout (see docs/architecture.md, "Trust model").
# The app account exports the micro services' monitoring subjects
# ($SRV.PING, INFO, STATS: controld's API statistics) to the system
# account, where operators' read-only keys are (nats micro stats gpuaas);
# every replica answers (response: stream).
# controld's API user (the second one) serves requests whose reply
# subjects the requesters choose: it may publish only to inboxes
# (%[7]s) and to the replies of imported service requests (_R_.>:
# the micro statistics above), never to streams, buckets, host or gateway
# subjects; it may ask JetStream's account information ($JS.API.INFO,
# read-only) on its own inbox (%[9]s), which is how controld notices
# that its server lost the rest of its cluster.
accounts {
  %[1]s {
    jetstream: enabled
    users: [
      { nkey: %[3]s }
      { nkey: %[8]s, permissions: {
          publish: { allow: ["%[7]s", "_R_.>", "$JS.API.INFO"] }
          subscribe: { allow: ["gpuaas.api.v1.>", "gpuaas.ctl.>", "$SRV.>", "%[9]s.>"] } } }
    ]
    exports: [ { service: "$SRV.>", response: stream } ]
  }
  %[2]s {
    users: [ { nkey: %[4]s, permissions: { subscribe: { allow: ["_INBOX_controld.>"] } } } ]
    imports: [ { service: { account: %[1]s, subject: "$SRV.>" } } ]
  }
}
system_account: %[2]s
authorization {
  auth_callout {
    issuer: %[5]s
    account: %[1]s
    auth_users: [ %[3]s, %[8]s, %[4]s ]
    xkey: %[6]s
  }
}
`, AppAccount, SystemAccount, a.Controld, a.System, a.Issuer, a.XKey, api.InboxWildcard, a.API, api.ControldAPIInboxPrefix)
}
