package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// secondUserRefused is the acceptance's "a second user's browser gets
// 403" for the share-me exposure at url, owned by dev's admin whose
// browser is ctx: ada, added to the same project, logs in in a context of
// her own; `gpuaas open` refuses her a link (exit 5), and a browser
// context of her own (no cookie of the owner's: Chromium's browser
// contexts share none) gets the login page (401) without credentials
// and the "Not shared with you" page (403) with her login as the bearer.
func secondUserRefused(t *testing.T, dev *devProc, ctx context.Context, url string) {
	t.Helper()
	r := dev.gpuaas(t, "", "admin", "user", "add", "ada@example.com", "--name", "Ada", "--json", "invite", "--jq", ".invite.code")
	code := strings.TrimSpace(r.stdout)
	if r.code != 0 || code == "" {
		t.Fatalf("admin user add: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"project", "add-member", "dev", "--email", "ada@example.com", "--role", "member"},
		{"context", "add", "ada", "--server", devServer(t, dev), "--project", "dev"},
	} {
		if r := dev.gpuaas(t, "", args...); r.code != 0 {
			t.Fatalf("gpuaas %s: exit %d %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := dev.gpuaas(t, "ada's password\n", "--context", "ada", "login", "--invite", code, "--password-stdin"); r.code != 0 {
		t.Fatalf("ada's login: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "--context", "ada", "open", "--print", url+"/"); r.code != 5 {
		t.Fatalf("ada mints a link into the owner's share-me exposure: exit %d, stdout %q, stderr %q; want 5 (forbidden)", r.code, r.stdout, r.stderr)
	}

	actx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	if err := chromedp.Do(actx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatalf("ada's browser opens %s: %v", url, err)
	}
	probe := func(bearer string) string {
		t.Helper()
		headers := "{}"
		if bearer != "" {
			headers = `{Authorization: "Bearer ` + bearer + `"}`
		}
		got, err := evalPromise[string](actx, `fetch("/", {cache: "no-store", headers: `+headers+`}).then(async (r) => r.status + " " + await r.text())`)
		if err != nil {
			t.Fatalf("fetch from ada's browser: %v", err)
		}
		return got
	}
	if got := probe(""); !strings.HasPrefix(got, "401 ") || strings.Contains(got, "renter-page") {
		t.Fatalf("ada's browser without credentials: %.200q; want 401 and the login page", got)
	}
	if got := probe(contextToken(t, dev, "ada")); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "Not shared with you") {
		t.Fatalf("ada's browser with her login as the bearer: %.200q; want 403, the \"Not shared with you\" page", got)
	}
}

// contextToken is the session token the CLI stored for context name.
func contextToken(t *testing.T, dev *devProc, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dev.configDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Contexts map[string]struct{ Token string } `json:"contexts"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.Contexts[name].Token == "" {
		t.Fatalf("config: no token for context %s: %v", name, err)
	}
	return cfg.Contexts[name].Token
}
