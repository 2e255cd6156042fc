package clientconfig

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadMissingFileIsEmpty(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Contexts) != 0 || c.CurrentContext != "" {
		t.Errorf("got %+v; want an empty config", c)
	}
	if want := filepath.Join(dir, FileName); c.Path() != want {
		t.Errorf("got path %q; want %q", c.Path(), want)
	}
}

func TestSaveRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gpuaas")
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	dev := Context{Server: "nats://127.0.0.1:4222", User: "admin@localhost", UserID: "u-1", Token: "tok", TokenExpiresAt: exp, Project: "dev"}
	c.SetContext("dev", dev)
	c.SetContext("prod", Context{Server: "nats://prod:4222"})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != "dev" {
		t.Errorf("got current %q; want dev (the first context set)", got.CurrentContext)
	}
	if g, _ := got.Context("dev"); g != dev {
		t.Errorf("got %+v; want %+v", g, dev)
	}
	if names := got.ContextNames(); len(names) != 2 || names[0] != "dev" || names[1] != "prod" {
		t.Errorf("got names %v; want [dev prod]", names)
	}
}

func TestSavePermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "gpuaas")
	c, _ := Load(dir)
	c.SetContext("dev", Context{Token: "secret"})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	// Saving again must keep the mode even if someone loosened it.
	if err := os.Chmod(c.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, c.Path(): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: got mode %o; want %o", path, got, want)
		}
	}
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	c, _ := Load(dir)
	c.SetContext("dev", Context{Project: "old"})
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	c.UpdateContext("dev", func(ctx *Context) { ctx.Project = "new" })
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	// A reader that opened the file before the save still sees the whole
	// old file: the new one was renamed into place, not written over it.
	b, err := io.ReadAll(old)
	if err != nil {
		t.Fatal(err)
	}
	if prev, _ := loadBytes(t, b); prev.Contexts["dev"].Project != "old" {
		t.Errorf("old handle reads project %q; want old", prev.Contexts["dev"].Project)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != FileName {
		t.Errorf("got dir entries %v; want only %s (no temp files left)", entries, FileName)
	}
	now, _ := Load(dir)
	if now.Contexts["dev"].Project != "new" {
		t.Errorf("got project %q; want new", now.Contexts["dev"].Project)
	}
}

func loadBytes(t *testing.T, b []byte) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(dir)
}

func TestLoadRejectsGarbage(t *testing.T) {
	if _, err := loadBytes(t, []byte("{not json")); err == nil {
		t.Error("got no error for a corrupt config; want one")
	}
}

func TestUpdateActiveCreatesContextOnActiveServer(t *testing.T) {
	c, _ := Load(t.TempDir())
	a := c.Active(Overrides{Server: "nats://other:4222"})
	c.UpdateActive(a, func(ctx *Context) { ctx.Project = "ml" })
	got, ok := c.Context(DefaultContextName)
	if !ok {
		t.Fatalf("no %q context created", DefaultContextName)
	}
	want := Context{Server: "nats://other:4222", Project: "ml"}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

func TestUseContext(t *testing.T) {
	c, _ := Load(t.TempDir())
	c.SetContext("dev", Context{})
	c.SetContext("prod", Context{})
	if err := c.UseContext("prod"); err != nil || c.CurrentContext != "prod" {
		t.Errorf("got current %q, err %v; want prod, nil", c.CurrentContext, err)
	}
	if err := c.UseContext("nope"); err == nil {
		t.Error("got no error for an unknown context; want one")
	}
}

func TestRemoveContext(t *testing.T) {
	cfg, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("a", Context{Server: "nats://a:4222"})
	cfg.SetContext("b", Context{Server: "nats://b:4222"})
	if err := cfg.RemoveContext("b"); err != nil || cfg.CurrentContext != "a" || len(cfg.Contexts) != 1 {
		t.Fatalf("remove b: %v, current %q, %d left; want a current and alone", err, cfg.CurrentContext, len(cfg.Contexts))
	}
	if err := cfg.RemoveContext("a"); err != nil || cfg.CurrentContext != "" || len(cfg.Contexts) != 0 {
		t.Fatalf("remove the current context: %v, current %q; want none current", err, cfg.CurrentContext)
	}
	if err := cfg.RemoveContext("a"); err == nil {
		t.Fatal("removing a missing context got nil; want an error")
	}
}
