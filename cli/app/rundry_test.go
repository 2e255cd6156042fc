package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/admin/appprice"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

func TestQuoteLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		q    RunQuote
		want string
	}{
		{name: "an app with a price", q: RunQuote{SKU: "h100-baremetal", GPUs: 8, AllocationPricePerHourMinor: 1760, App: "jupyter",
			AppPricePerHourMinor: 50, PricePerHourMinor: 1810, Currency: "usd"},
			want: "h100-baremetal (8 GPU(s)) $17.60/h + app jupyter $0.50/h = $18.10/h"},
		{name: "on an allocation", q: RunQuote{AllocationID: "a-1", SKU: "h100-baremetal", GPUs: 8, AllocationPricePerHourMinor: 1760,
			App: "jupyter", PricePerHourMinor: 1760, Currency: "usd"},
			want: "a-1 h100-baremetal (8 GPU(s)) $17.60/h + app jupyter $0.00/h = $17.60/h"},
		{name: "an image", q: RunQuote{SKU: "h100-baremetal", GPUs: 1, AllocationPricePerHourMinor: 220, PricePerHourMinor: 220, Currency: "usd"},
			want: "h100-baremetal (1 GPU(s)) $2.20/h = $2.20/h"},
	} {
		if got := quoteLine(tt.q); got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}

// TestRunDryRunShowsTheAppPrice: an operator's `admin app-price set`
// shows in `app run NAME --sku … --dry-run`'s price line and JSON (a real
// controld and registry), and nothing is rented.
func TestRunDryRunShowsTheAppPrice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts controld")
	}
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	reg, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	env := controldtest.Start(t, controldtest.Options{Registry: registry.Settings{Addr: srv.Addr()}})
	ctx := t.Context()
	c := env.Client(env.AdminToken, api.WithProject(controldtest.ProjectName))
	pushVerified(t, c, reg, "tiny", map[string]string{"bin/hello": "hello"})
	if _, err := c.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: jup\nimage: tiny\n", Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppPromote(ctx, api.AppRef{App: "jup"}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		ios, _, out, _ := cmdutil.Test()
		f := &cmdutil.Factory{IOStreams: ios, Client: func() (*api.Client, error) { return c, nil }}
		cmd := NewCmdRun(f, nil)
		if args[0] == "admin" {
			cmd = appprice.NewCmdSet(f, nil)
			args = args[1:]
		}
		err := cmdtest.Execute(cmd, args...)
		return out.String(), err
	}
	const want = "h100-baremetal (8 GPU(s)) $17.60/h + app jup $0.00/h = $17.60/h\n"
	if out, err := run("jup", "--sku", "h100-baremetal", "--gpus", "8", "--dry-run"); err != nil || out != want {
		t.Errorf("dry run before a price: %q, %v; want %q", out, err, want)
	}
	if _, err := run("admin", "jup", "1.50"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("jup", "--sku", "h100-baremetal", "--gpus", "8", "--dry-run"); err != nil ||
		out != "h100-baremetal (8 GPU(s)) $17.60/h + app jup $1.50/h = $19.10/h\n" {
		t.Errorf("dry run: %q, %v", out, err)
	}
	out, err := run("jup", "--sku", "h100-baremetal", "--gpus", "8", "--dry-run", "--json")
	var q RunQuote
	if err != nil || json.Unmarshal([]byte(out), &q) != nil || q.AllocationPricePerHourMinor != 1760 ||
		q.AppPricePerHourMinor != 150 || q.PricePerHourMinor != 1910 || q.App != "jup" || strings.Contains(out, "exit_code") {
		t.Errorf("dry run --json: %q, %v; want 1760 + 150 = 1910, the quote's fields only", out, err)
	}
	// The run charges jup's price for its image however it is named
	// (docs/decisions/0059-app-prices.md): the image itself, a project's
	// app shadowing jup's name, a project's app of another name.
	const priced = "h100-baremetal (8 GPU(s)) $17.60/h + app jup $1.50/h = $19.10/h\n"
	if out, err := run("tiny", "--sku", "h100-baremetal", "--gpus", "8", "--dry-run"); err != nil || out != priced {
		t.Errorf("dry run of jup's image: %q, %v; want %q", out, err, priced)
	}
	for _, name := range []string{"jup", "myjup"} {
		if _, err := c.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: " + name + "\nimage: tiny\n", Project: controldtest.ProjectName}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppPromote(ctx, api.AppRef{App: name, Project: controldtest.ProjectName}); err != nil {
			t.Fatal(err)
		}
		if out, err := run(name, "--sku", "h100-baremetal", "--gpus", "8", "--dry-run"); err != nil || out != priced {
			t.Errorf("dry run of project app %s of jup's image: %q, %v; want %q", name, out, err, priced)
		}
	}
	// On an allocation of another project the run names its app there:
	// its own "nb" is jup's image; the default project's "nb", another
	// image, costs nothing of its own. The quote is the run's.
	if _, err := c.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	free := pushVerified(t, c, reg, "tiny2", map[string]string{"bin/other": "other"})
	for _, a := range []struct{ project, image string }{{controldtest.ProjectName, free}, {"other", "tiny"}} {
		if _, err := c.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: nb\nimage: " + a.image + "\n", Project: a.project}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppPromote(ctx, api.AppRef{App: "nb", Project: a.project}); err != nil {
			t.Fatal(err)
		}
	}
	env.Credit(t, "other", 100000)
	other, err := c.With(api.WithProject("other")).AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run("nb", "--alloc", other.ID, "--dry-run", "--json"); err != nil || json.Unmarshal([]byte(out), &q) != nil ||
		q.AppPricePerHourMinor != 150 || q.App != "jup" {
		t.Errorf("dry run of nb on an allocation of project other: %q, %v; want jup's $1.50/h, as the run charges", out, err)
	}
	// The platform's apps still count there (its project is the caller's, not -p's).
	if out, err := run("jup", "--alloc", other.ID, "--dry-run", "--json"); err != nil || json.Unmarshal([]byte(out), &q) != nil ||
		q.AppPricePerHourMinor != 150 || q.App != "jup" {
		t.Errorf("dry run of the platform's jup on an allocation of project other: %q, %v; want $1.50/h", out, err)
	}
	if _, err := run("admin", "jup", "0"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("tiny", "--sku", "h100-baremetal", "--gpus", "8", "--dry-run"); err != nil || strings.Contains(out, "app") {
		t.Errorf("dry run of an image no priced app has: %q, %v; want no app part", out, err)
	}
	allocs, err := c.AllocList(ctx, api.AllocListRequest{})
	if err != nil || len(allocs.Allocations) != 0 {
		t.Errorf("allocations after dry runs: %+v, %v; want none", allocs, err)
	}
}

// pushVerified pushes a tiny image of files to reg and publishes it as
// platform image name, verified and promoted; it returns name.
func pushVerified(t *testing.T, c *api.Client, reg *registry.Client, name string, files map[string]string) string {
	t.Helper()
	ctx := t.Context()
	img, err := registry.Tiny(files)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reg.Push(ctx, "gpuaas/"+name, img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImagePublish(ctx, api.ImagePublishRequest{Name: name, Ref: ref, Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImageVerify(ctx, api.ImageChangeRequest{Image: name}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		i, err := c.ImageGet(ctx, api.ImageRef{Image: name})
		if err != nil {
			t.Fatal(err)
		}
		if i.Trust == api.TrustVerified {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s still %s", name, i.Trust)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.ImagePromote(ctx, api.ImageChangeRequest{Image: name}); err != nil {
		t.Fatal(err)
	}
	return name
}
