package devenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// publishedWebhookSecret is the fixed secret `gpuaas dev` used to ship
// (in its source and its banner): anyone able to reach the webhook could
// sign a "paid" event with it.
const publishedWebhookSecret = "whsec_gpuaas_dev"

// devStripe configures Stripe for a platform in dataDir as Start does
// (prepareDataDir, then stripe) and returns the webhook secret.
func devStripe(t *testing.T, dataDir string, cfg Config) (string, *Env) {
	t.Helper()
	cfg.DataDir, cfg.StripeAPI = dataDir, "http://127.0.0.1:12111"
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	if err := prepareDataDir(dataDir, cfg.SystemUsers); err != nil {
		t.Fatal(err)
	}
	e := &Env{cfg: cfg}
	s, _, err := e.stripe()
	if err != nil {
		t.Fatal(err)
	}
	return s.WebhookSecret, e
}

// TestDevWebhookSecretPerDataDir: `gpuaas dev` ships no webhook secret.
// Each data directory gets a random one, made at the first start, kept
// 0600 in the directory and used again by later starts; one given in
// the Config (GPUAAS_STRIPE_WEBHOOK_SECRET) is used instead.
func TestDevWebhookSecretPerDataDir(t *testing.T) {
	one, two := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "two")
	s1, e1 := devStripe(t, one, Config{})
	s2, _ := devStripe(t, two, Config{})
	if s1 == publishedWebhookSecret || s2 == publishedWebhookSecret || s1 == s2 {
		t.Fatalf("secrets %q and %q; want two random ones, neither the published %q", s1, s2, publishedWebhookSecret)
	}
	if !strings.HasPrefix(s1, "whsec_") || len(s1) < 40 {
		t.Errorf("secret %q; want whsec_ and 32 random bytes", s1)
	}
	if want := filepath.Join(one, WebhookSecretFile); e1.WebhookSecretFile != want {
		t.Errorf("secret file %q; want %q", e1.WebhookSecretFile, want)
	}
	st, err := os.Stat(e1.WebhookSecretFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	if again, _ := devStripe(t, one, Config{}); again != s1 {
		t.Errorf("a later start on the same directory: got %q; want %q", again, s1)
	}

	given, e := devStripe(t, filepath.Join(t.TempDir(), "given"), Config{StripeWebhookSecret: "whsec_fromstripecli"})
	if given != "whsec_fromstripecli" || e.WebhookSecretFile != "" {
		t.Errorf("given secret: got %q (file %q); want it, and no file", given, e.WebhookSecretFile)
	}

	// A secret file others could read may have leaked: refused.
	if err := os.Chmod(e1.WebhookSecretFile, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: one, StripeAPI: "http://127.0.0.1:12111"}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (&Env{cfg: cfg}).stripe(); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a 0644 secret file: got %v; want it refused", err)
	}
}

// TestDevWebhookSecretUnreadableBySimUsers: with isolated sim users
// (Config.SystemUsers, as root), renters' sessions run as other POSIX
// users on this machine and can reach the loopback webhook, so the
// secret is what stops them: such a user cannot read it.
func TestDevWebhookSecretUnreadableBySimUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("isolated sim users need root")
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		t.Fatalf("runuser: %v", err)
	}
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil { // t.TempDir's parent is 0700
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	secret, e := devStripe(t, data, Config{SystemUsers: true})
	// The check is real: that user can read a file of the directory made
	// readable to all.
	open := filepath.Join(data, "hosts", "readable")
	if err := os.WriteFile(open, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(runuser, "-u", "nobody", "--", "cat", open).CombinedOutput(); err != nil {
		t.Fatalf("nobody cannot read a world-readable file there either (%v: %s): the test proves nothing", err, out)
	}
	out, err := exec.Command(runuser, "-u", "nobody", "--", "cat", e.WebhookSecretFile).CombinedOutput()
	if err == nil || strings.Contains(string(out), secret) {
		t.Fatalf("nobody read the webhook secret: %s", out)
	}
}
