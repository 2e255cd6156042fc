package image

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func streams(tty bool) *cmdutil.IOStreams {
	ios, _, _, _ := cmdtest.Streams(tty)
	ios.SetNoColor(true)
	return ios
}

func TestNewCmdList(t *testing.T) {
	var got *ListOptions
	if err := cmdtest.Execute(NewCmdList(cmdtest.Factory(streams(false)), func(_ context.Context, o *ListOptions) error { got = o; return nil }),
		"--all", "--json=name,trust"); err != nil {
		t.Fatal(err)
	}
	if !got.All || got.Exporter == nil {
		t.Errorf("got %+v; want --all and --json", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(cmdtest.Factory(streams(false)), nil), "extra"), "")
}

func TestNewCmdPublish(t *testing.T) {
	var got *PublishOptions
	run := func(_ context.Context, o *PublishOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdPublish(cmdtest.Factory(streams(false)), run), "tool", "--ref", "r/tool@sha256:ab", "--platform"); err != nil {
		t.Fatal(err)
	}
	if got.Name != "tool" || got.Ref != "r/tool@sha256:ab" || !got.Platform {
		t.Errorf("got %+v", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdPublish(cmdtest.Factory(streams(false)), run), "tool"), "--ref is required")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdPublish(cmdtest.Factory(streams(false)), run)), "")
}

func TestNewCmdImport(t *testing.T) {
	var got *ImportOptions
	run := func(_ context.Context, o *ImportOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdImport(cmdtest.Factory(streams(false)), run), "tool", "tool.tar",
		"--registry", "127.0.0.1:5000", "--registry-auth", "cred.json"); err != nil {
		t.Fatal(err)
	}
	if got.Name != "tool" || got.File != "tool.tar" || got.Registry != "127.0.0.1:5000" || got.RegistryAuth != "cred.json" || got.Platform {
		t.Errorf("got %+v", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdImport(cmdtest.Factory(streams(false)), run), "tool"), "")
}

func TestChangeVerbs(t *testing.T) {
	for name, build := range map[string]func(*cmdutil.Factory, func(context.Context, *ChangeOptions) error) *cobra.Command{
		"verify": NewCmdVerify, "promote": NewCmdPromote, "deprecate": NewCmdDeprecate,
		"retire": NewCmdRetire, "revoke": NewCmdRevoke,
	} {
		t.Run(name, func(t *testing.T) {
			var got *ChangeOptions
			run := func(_ context.Context, o *ChangeOptions) error { got = o; return nil }
			args := []string{"tiny", "--json=name"}
			if name == "revoke" {
				args = append(args, "--reason", "CVE-1")
			}
			if err := cmdtest.Execute(build(cmdtest.Factory(streams(false)), run), args...); err != nil {
				t.Fatal(err)
			}
			if got.Image != "tiny" || got.Exporter == nil || (name == "revoke") != (got.Reason == "CVE-1") {
				t.Errorf("got %+v", got)
			}
			cmdtest.WantUsageError(t, cmdtest.Execute(build(cmdtest.Factory(streams(false)), run)), "")
		})
	}
}

func TestPrintImages(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	imgs := []api.Image{
		{Name: "tiny", Scope: api.ImageScopePlatform, Lifecycle: api.ImagePromoted, Trust: api.TrustVerified,
			Digest: "sha256:" + strings.Repeat("ab", 32), SizeBytes: 2048, UpdatedAt: at},
		{Name: "tool", Scope: api.ImageScopeProject, Project: "research", Lifecycle: api.ImagePublished,
			Trust: api.TrustFailedVerification, Digest: "sha256:" + strings.Repeat("cd", 32), UpdatedAt: at},
	}
	ios, _, out, _ := cmdtest.Streams(false)
	if err := printImages(ios, at, imgs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "tiny\tplatform\tpromoted\tverified\tsha256:abababababab\t2.0 KiB\t") ||
		!strings.HasPrefix(lines[1], "tool\tresearch\tpublished\tfailed_verification\tsha256:cdcdcdcdcdcd\t-\t") {
		t.Errorf("piped table:\n%s", out)
	}
}
