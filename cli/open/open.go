// Package open holds `gpuaas open`: a one-time link into an exposure for
// a browser.
package open

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Options are the inputs of `gpuaas open`.
type Options struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)
	URL    string
	// Print only prints the link; otherwise it is also opened in the
	// browser ($BROWSER, else the system's opener) when one can be.
	Print bool
	// Launch opens a link in a browser (tests replace it).
	Launch func(link string) error
}

// NewCmdOpen builds `gpuaas open`; runF replaces openRun in tests.
func NewCmdOpen(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Launch: Launch}
	cmd := &cobra.Command{
		Use:   "open URL",
		Short: "Open an exposure in your browser, logged in",
		Long: `Mint a one-time link into an exposure (an allocation's port served over HTTPS,
see gpuaas expose) and open it in the browser: it works once, within a minute,
and leaves a cookie for that exposure alone, bound to this login: ` + "`gpuaas logout`" + ` ends
it. The link goes to URL's path on the exposure's own host.`,
		Example: `  gpuaas open https://8888-a-7k2mzq4xv9cd.localhost:8443/lab
  gpuaas open --print https://8888-a-7k2mzq4xv9cd.apps.example.com/`,
		Args: cmdutil.ExactArgs(1, "the exposure's URL (see `gpuaas expose list`)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.URL = args[0]
			if _, _, err := SplitURL(opts.URL); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return openRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Print, "print", false, "Only print the link")
	return cmd
}

func openRun(ctx context.Context, opts *Options) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	return Link(ctx, client, opts.IO, opts.URL, opts.Print, opts.Launch)
}

// SplitURL reads an exposure's URL: its host label and the path (with
// its query) to land on.
func SplitURL(raw string) (label, path string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", "", fmt.Errorf("%q is not an exposure's https URL", raw)
	}
	label, _, _ = strings.Cut(u.Hostname(), ".")
	if _, _, ok := api.ParseExposureHost(label); !ok {
		return "", "", fmt.Errorf("%q is not an exposure's URL (https://<port>-<allocation>.<domain>/)", raw)
	}
	path = u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return label, path, nil
}

// Link mints a one-time link into the exposure at rawURL and prints it on
// stdout; unless printOnly (or launch is nil), it also opens it with
// launch when stdout is a terminal.
func Link(ctx context.Context, client *api.Client, io *cmdutil.IOStreams, rawURL string, printOnly bool, launch func(string) error) error {
	label, path, err := SplitURL(rawURL)
	if err != nil {
		return err
	}
	resp, err := client.ExposeLink(ctx, api.ExposeLinkRequest{Host: label, Path: path})
	if err != nil {
		return err
	}
	u, _ := url.Parse(rawURL)
	link := "https://" + u.Host + api.LinkPath + "?code=" + resp.Code
	if _, err := fmt.Fprintln(io.Out, link); err != nil {
		return err
	}
	if printOnly || launch == nil || !io.IsStdoutTTY() {
		fmt.Fprintln(io.ErrOut, "The link works once, within a minute.")
		return nil
	}
	if err := launch(link); err != nil {
		fmt.Fprintf(io.ErrOut, "Could not open a browser (%v): open the link above within a minute.\n", err)
	}
	return nil
}

// Launch opens link in $BROWSER, else the system's opener.
func Launch(link string) error {
	if b := os.Getenv("BROWSER"); b != "" {
		return exec.Command(b, link).Start()
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	return exec.Command(opener, link).Start()
}
