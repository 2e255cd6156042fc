package image

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// printImages prints images as a table.
func printImages(ios *cmdutil.IOStreams, now time.Time, imgs []api.Image) error {
	if len(imgs) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No images")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("name", "scope", "lifecycle", "trust", "digest", "size", "updated")
	cs := ios.ColorScheme()
	for _, img := range imgs {
		t.AddField(img.Name)
		scope := img.Scope
		if img.Project != "" {
			scope = img.Project
		}
		t.AddField(scope)
		t.AddField(img.Lifecycle, cmdutil.WithColor(lifecycleColor(cs, img.Lifecycle)))
		t.AddField(img.Trust, cmdutil.WithColor(trustColor(cs, img.Trust)))
		t.AddField(shortDigest(img.Digest))
		t.AddField(size(img.SizeBytes))
		t.AddField(cmdutil.FormatTime(ios, now, img.UpdatedAt))
		t.EndRow()
	}
	return t.Render()
}

// printImage prints one image, a field a line.
func printImage(ios *cmdutil.IOStreams, now time.Time, img api.Image) error {
	cs := ios.ColorScheme()
	out := ios.Out
	fmt.Fprintf(out, "name:       %s (%s)\n", img.Name, img.ID)
	scope := img.Scope
	if img.Project != "" {
		scope += " " + img.Project
	}
	fmt.Fprintf(out, "scope:      %s\n", scope)
	fmt.Fprintf(out, "ref:        %s\n", img.Ref)
	if img.Source != "" {
		fmt.Fprintf(out, "source:     %s (resolved once, at publish)\n", img.Source)
	}
	fmt.Fprintf(out, "lifecycle:  %s\n", lifecycleColor(cs, img.Lifecycle)(img.Lifecycle))
	trust := trustColor(cs, img.Trust)(img.Trust)
	if img.TrustReason != "" {
		trust += " (" + img.TrustReason + ")"
	}
	fmt.Fprintf(out, "trust:      %s\n", trust)
	if v := img.Verification; v != nil {
		line := "queued " + cmdutil.FormatTime(ios, now, v.RequestedAt)
		if v.Attempts > 0 {
			line += fmt.Sprintf(", %d attempts", v.Attempts)
		}
		if v.LastError != "" {
			line += ", last: " + v.LastError + "; next " + cmdutil.FormatTime(ios, now, v.NextAttemptAt)
		}
		fmt.Fprintf(out, "verifying:  %s\n", line)
	}
	if img.VerifiedAt != nil {
		fmt.Fprintf(out, "checked:    %s: %s, %d layers, %s\n", cmdutil.FormatTime(ios, now, *img.VerifiedAt),
			img.Platform, img.Layers, size(img.SizeBytes))
	}
	fmt.Fprintf(out, "updated:    %s\n", cmdutil.FormatTime(ios, now, img.UpdatedAt))
	return nil
}

func lifecycleColor(cs cmdutil.ColorScheme, s string) func(string) string {
	switch s {
	case api.ImagePromoted:
		return cs.Green
	case api.ImageDeprecated:
		return cs.Yellow
	case api.ImageRetired:
		return cs.Gray
	}
	return func(s string) string { return s }
}

func trustColor(cs cmdutil.ColorScheme, s string) func(string) string {
	switch s {
	case api.TrustVerified:
		return cs.Green
	case api.TrustFailedVerification, api.TrustRevoked:
		return cs.Red
	}
	return cs.Yellow
}

// shortDigest is sha256: and the first 12 hex digits, as docker shows it.
func shortDigest(d string) string {
	if hex, ok := strings.CutPrefix(d, "sha256:"); ok && len(hex) > 12 {
		return "sha256:" + hex[:12]
	}
	return d
}

func size(n int64) string {
	switch {
	case n == 0:
		return "-"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
