// Package trust decides what a CLI context trusts about its server, and
// never lets an answer from the bus change it silently.
//
// At its first login a context pins controld's server key (the key that
// signs session tokens and trust bundles; see internal/trustbundle), the
// gateway's host CA keys and the gateway address, from a bundle the server
// signed. From then on, ssh.cas answers are believed only through a bundle
// signed by the pinned key: a rotation of the host CA (`gpuaas ops ca
// rotate`) or a moved gateway arrives signed and is taken without a
// prompt; a bundle signed by another key, no bundle at all, a bundle that
// drops a pinned host CA key without retiring it or takes a retired one
// back, or one older than what is pinned, is refused and nothing on disk
// changes. Only `gpuaas context trust --reset`, which shows the
// fingerprints and asks, replaces the pins.
//
// The first pin is trust on first use, as with OpenSSH's known_hosts;
// `gpuaas context add --server-key` pins the server key ahead of the first
// login instead.
package trust

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

// ResetHint is how a user replaces pins after checking the change with the
// operator.
const ResetHint = "if your operator did change this, compare the fingerprints with theirs, then run `gpuaas context trust --reset`"

// refuse is the error of an answer the pins do not allow.
func refuse(format string, args ...any) error {
	return &api.Error{Code: api.CodeConflict, Message: "refusing the server's SSH trust settings: " + fmt.Sprintf(format, args...),
		Hint: ResetHint}
}

// Decision is what a checked bundle means for a context's pins.
type Decision struct {
	// Statement is the verified bundle's content: what to write in the SSH
	// files.
	Statement trustbundle.Statement
	// Pins is what the context should pin from now on.
	Pins clientconfig.Trust
	// First reports that nothing was pinned yet (trust on first use).
	First bool
	// Changed reports that Pins differ from what was pinned.
	Changed bool
	// Notes say what changed, for the user.
	Notes []string
}

// Check decides whether bundle may be believed by a context that pinned
// pinned (nil: nothing yet), at now.
func Check(pinned *clientconfig.Trust, bundle *api.TrustBundle, now time.Time) (*Decision, error) {
	if bundle == nil {
		return nil, refuse("the answer carries no signed trust bundle")
	}
	st, err := trustbundle.Open(bundle)
	if err != nil {
		return nil, refuse("%v", err)
	}
	d := &Decision{Statement: st}
	d.Pins = clientconfig.Trust{ServerKey: st.ServerKey, HostCAs: slices.Clone(st.HostCAs),
		RetiredHostCAs: slices.Clone(st.RetiredHostCAs), Gateway: st.Gateway, IssuedAt: st.IssuedAt, PinnedAt: now.UTC()}
	if pinned == nil || pinned.ServerKey == "" {
		d.First, d.Changed = true, true
		d.Notes = append(d.Notes, fmt.Sprintf("pinned the server key %s (first use)", trustbundle.Fingerprint(st.ServerKey)))
		return d, nil
	}
	got := trustbundle.Fingerprint(st.ServerKey)
	want := pinnedFingerprint(pinned.ServerKey)
	if got != want {
		return nil, refuse("it is signed by the server key %s, but this context trusts %s", got, want)
	}
	if !pinned.PinnedAt.IsZero() {
		d.Pins.PinnedAt = pinned.PinnedAt
	}
	if len(pinned.HostCAs) == 0 {
		// Only the server key was given (context add --server-key): the
		// rest is learned now, from a bundle that key signed.
		d.First, d.Changed = true, true
		d.Notes = append(d.Notes, "confirmed the server key "+got+" given with `gpuaas context add --server-key`")
		return d, nil
	}
	if err := checkHostCAs(pinned, st); err != nil {
		return nil, err
	}
	d.Changed = !sameContent(pinned, d.Pins)
	if d.Changed && st.IssuedAt.Before(pinned.IssuedAt) {
		return nil, refuse("it is older (%s) than the settings this context pinned (%s): a replayed answer?",
			st.IssuedAt.UTC().Format(time.RFC3339), pinned.IssuedAt.UTC().Format(time.RFC3339))
	}
	if !d.Changed {
		d.Pins = *pinned
		return d, nil
	}
	d.Notes = changes(pinned, st)
	return d, nil
}

// checkHostCAs refuses a bundle that would rewrite the pinned host CA keys
// in a way no rotation does: dropping a key nobody retired, trusting a
// retired key again, forgetting a retirement.
func checkHostCAs(pinned *clientconfig.Trust, st trustbundle.Statement) error {
	now := fingerprints(st.HostCAs)
	for _, fp := range fingerprints(pinned.HostCAs) {
		if !slices.Contains(now, fp) && !slices.Contains(st.RetiredHostCAs, fp) {
			return refuse("it drops the pinned host CA key %s without retiring it", fp)
		}
	}
	for _, fp := range now {
		if slices.Contains(pinned.RetiredHostCAs, fp) {
			return refuse("it trusts the host CA key %s again, which was retired", fp)
		}
	}
	for _, fp := range pinned.RetiredHostCAs {
		if !slices.Contains(st.RetiredHostCAs, fp) {
			return refuse("it no longer lists the host CA key %s as retired: an older answer?", fp)
		}
	}
	return nil
}

func sameContent(a *clientconfig.Trust, b clientconfig.Trust) bool {
	return a.ServerKey == b.ServerKey && slices.Equal(a.HostCAs, b.HostCAs) &&
		slices.Equal(a.RetiredHostCAs, b.RetiredHostCAs) && a.Gateway == b.Gateway
}

// changes describes what a signed bundle changes.
func changes(pinned *clientconfig.Trust, st trustbundle.Statement) []string {
	var notes []string
	was := fingerprints(pinned.HostCAs)
	for _, fp := range fingerprints(st.HostCAs) {
		if !slices.Contains(was, fp) {
			notes = append(notes, "now trusting the new host CA key "+fp+" (signed by the pinned server key)")
		}
	}
	for _, fp := range st.RetiredHostCAs {
		if slices.Contains(was, fp) {
			notes = append(notes, "no longer trusting the retired host CA key "+fp)
		}
	}
	if pinned.Gateway != st.Gateway {
		notes = append(notes, fmt.Sprintf("the gateway moved from %q to %q (signed by the pinned server key)", pinned.Gateway, st.Gateway))
	}
	return notes
}

func fingerprints(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, trustbundle.Fingerprint(l))
	}
	return out
}

// pinnedFingerprint is the fingerprint of a pinned server key, which may be
// stored as the fingerprint itself.
func pinnedFingerprint(pin string) string {
	if strings.HasPrefix(pin, "SHA256:") {
		return pin
	}
	return trustbundle.Fingerprint(pin)
}

// ValidServerKey checks a server key given by a user: a SHA256 fingerprint
// or an ssh-ed25519 public key.
func ValidServerKey(s string) error {
	if strings.HasPrefix(s, "SHA256:") {
		if len(s) != len("SHA256:")+43 {
			return fmt.Errorf("%q is not a SHA256 key fingerprint", s)
		}
		return nil
	}
	if _, err := trustbundle.ServerPublicKey(s); err != nil {
		return fmt.Errorf("not a SHA256 fingerprint nor an ssh-ed25519 key: %v", err)
	}
	return nil
}

// pinnedOf returns the context's pins, and whether a decision about them
// may be stored: not when an override (GPUAAS_SERVER, --server) points
// the command at another server than the stored context's, whose pins
// then do not apply.
func pinnedOf(cfg *clientconfig.Config, active clientconfig.Active) (*clientconfig.Trust, bool) {
	stored, ok := cfg.Context(active.Name)
	if ok && stored.Server != "" && stored.Server != active.Server {
		return nil, false
	}
	return stored.Trust, true
}

// Fetched is a checked ssh.cas answer.
type Fetched struct {
	*Decision
	// Persist reports that the decision belongs in the context (see Apply).
	Persist bool
}

// Fetch asks the server for its SSH trust settings and checks them
// against the active context's pins. Nothing is written.
func Fetch(ctx context.Context, client *api.Client, cfg *clientconfig.Config, active clientconfig.Active, now time.Time) (*Fetched, error) {
	cas, err := client.SSHCAs(ctx)
	if err != nil {
		return nil, fmt.Errorf("get ssh CA keys: %w", err)
	}
	pinned, persist := pinnedOf(cfg, active)
	d, err := Check(pinned, cas.Bundle, now)
	if err != nil {
		return nil, err
	}
	return &Fetched{Decision: d, Persist: persist}, nil
}

// Apply stores the pins in the context when they changed; the caller saves
// the file. It reports whether anything was stored.
func (f *Fetched) Apply(cfg *clientconfig.Config, active clientconfig.Active) bool {
	if !f.Changed || !f.Persist {
		return false
	}
	pins := f.Pins
	cfg.UpdateActive(active, func(c *clientconfig.Context) { c.Trust = &pins })
	return true
}

// Report tells the user what changed.
func (f *Fetched) Report(w io.Writer, contextName string) {
	for _, n := range f.Notes {
		fmt.Fprintf(w, "Context %s: %s\n", contextName, n)
	}
}

// VerifyLogin checks that a login reply's token was signed by serverKey
// for the user and session the reply names: a reply from anything but the
// pinned server is refused before it is stored.
func VerifyLogin(serverKey string, resp *api.LoginResponse) error {
	pub, err := trustbundle.ServerPublicKey(serverKey)
	if err != nil {
		return refuse("%v", err)
	}
	var claims jwt.RegisteredClaims
	// The signature is what matters here; the CLI's clock is no judge of
	// the token's window (the server checks it on every call).
	_, err = jwt.ParseWithClaims(resp.Token, &claims, func(*jwt.Token) (any, error) { return ed25519.PublicKey(pub), nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithoutClaimsValidation())
	if err != nil {
		return refuse("the login reply was not signed by the server key %s this context trusts (%v)",
			trustbundle.Fingerprint(serverKey), shortJWTError(err))
	}
	if claims.Subject != resp.User.ID || claims.ID != resp.SessionID {
		return refuse("the login reply's token is for user %q, session %q; the reply says %q, %q",
			claims.Subject, claims.ID, resp.User.ID, resp.SessionID)
	}
	return nil
}

func shortJWTError(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "not a token"
	}
	return err.Error()
}

// PinLogin checks, before a login is stored, the server's trust bundle
// against the context's pins (pinning it at the first login) and that the
// login reply's token was signed by the pinned server key; the pins go
// into cfg, saved with the session by the caller. client is the one the
// login went through.
func PinLogin(ctx context.Context, w io.Writer, cfg *clientconfig.Config, active clientconfig.Active, client *api.Client,
	resp *api.LoginResponse, now time.Time) error {
	f, err := Fetch(ctx, client, cfg, active, now)
	if err != nil {
		return err
	}
	if err := VerifyLogin(f.Pins.ServerKey, resp); err != nil {
		return err
	}
	if f.Apply(cfg, active) {
		f.Report(w, active.Name)
	}
	return nil
}
