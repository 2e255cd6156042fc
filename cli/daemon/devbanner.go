package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/gpuaas/gpuaas/internal/devenv"
)

// printBanner tells the user what runs where and what to do next.
// isolated says the sim hosts' sessions run as users of their own. The
// banner goes out in one write, so the platform's log lines (written to the
// same stream by other goroutines) never land inside it, and whoever waits
// for its first line has all of it.
func printBanner(opts *DevOptions, env *devenv.Env, isolated bool) {
	var b bytes.Buffer
	writeBanner(&b, opts, env, isolated)
	_, _ = opts.IO.ErrOut.Write(b.Bytes())
}

// writeBanner writes printBanner's text to w.
func writeBanner(w io.Writer, opts *DevOptions, env *devenv.Env, isolated bool) {
	url := env.NATSURL
	fmt.Fprintln(w, "\ngpuaas dev is running")
	fmt.Fprintln(w, describe("server", url))
	fmt.Fprintln(w, describe("data", opts.DataDir))
	switch {
	case env.AdminCreated && env.PasswordGenerated:
		fmt.Fprintln(w, describe("admin", DevAdminEmail+"  password: "+env.AdminPassword+"  (shown once; keep it)"))
	case opts.PasswordFile != "":
		fmt.Fprintln(w, describe("admin", DevAdminEmail+"  (password from --password-file)"))
	default:
		fmt.Fprintln(w, describe("admin", DevAdminEmail+"  (password as set before; --password-file sets a new one)"))
	}
	fmt.Fprintln(w, describe("project", DevProject))
	fmt.Fprintln(w, describe("hosts", fmt.Sprintf("%d simulated (gpuaas node list)", opts.Hosts)))
	fmt.Fprintln(w, describe("ssh", "gateway on "+env.GatewayAddr))
	printVMBanner(w, opts.Config)
	fmt.Fprintln(w, describe("https", "exposures at "+strings.Replace(env.AppsURL, "*", "<port>-<alloc>", 1)+" (gpuaas expose)"))
	if env.DevCAFile != "" {
		fmt.Fprintln(w, describe("", "trust its dev CA: sudo cp "+env.DevCAFile+" /usr/local/share/ca-certificates/gpuaas-dev.crt && sudo update-ca-certificates"))
	} else {
		fmt.Fprintln(w, describe("", "certificates from "+opts.HTTPSACMECA))
	}
	fmt.Fprintln(w, describe("nats", "auth callout on: every connection needs a session token or a registered key"))
	if c := env.NATSCluster; c != nil {
		for i := range c.Len() {
			fmt.Fprintln(w, describe("", fmt.Sprintf("server %s on %s", c.Name(i), c.ServerURL(i))))
		}
		fmt.Fprintln(w, describe("", fmt.Sprintf("cluster of %d, JetStream with %d replicas", c.Len(), c.Len())))
		fmt.Fprintln(w, describe("controld", fmt.Sprintf("%d replicas", len(env.ControldMetricsURLs))))
	}
	for i, u := range env.ControldMetricsURLs {
		name := "controld"
		if len(env.ControldMetricsURLs) > 1 {
			name = fmt.Sprintf("controld %d", i+1)
		}
		fmt.Fprintln(w, describe("metrics", name+" "+u+"/metrics (and /healthz, /readyz)"))
	}
	fmt.Fprintln(w, describe("metrics", "sshgate "+env.GatewayMetricsURL+"/metrics (and /healthz, /readyz)"))
	if isolated {
		fmt.Fprintln(w, describe("isolation", "sessions on sim hosts run as unprivileged users of their own"))
	} else {
		fmt.Fprintln(w, describe("isolation", "NONE: not root, so sessions on sim hosts run as you and can read this process's data"))
	}
	if opts.StripeAPI != "" {
		secret := "signing secret from $GPUAAS_STRIPE_WEBHOOK_SECRET"
		if env.WebhookSecretFile != "" {
			secret = "signing secret in " + env.WebhookSecretFile
		}
		fmt.Fprintln(w, describe("stripe", opts.StripeAPI+"; webhook "+env.WebhookURL+" (loopback only; "+secret+")"))
	} else {
		fmt.Fprintln(w, describe("stripe", "off: `gpuaas billing topup` is unavailable (see --stripe-api)"))
	}
	gatewayHost, _, _ := net.SplitHostPort(env.GatewayAddr)
	fmt.Fprintln(w, "\nNext, from another shell:")
	fmt.Fprintln(w, "  gpuaas login")
	fmt.Fprintln(w, "  gpuaas catalog list")
	fmt.Fprintln(w, "  gpuaas alloc create --sku h200-slice --gpus 2 --wait")
	fmt.Fprintln(w, "  gpuaas alloc list")
	fmt.Fprintln(w, "  gpuaas ssh-config --write && ssh <alloc-id>@"+gatewayHost)
	fmt.Fprintln(w, "  ssh gpuaas-"+DevContextName+"   (the dashboard)   ssh gpuaas-"+DevContextName+" alloc list   (commands)")
	fmt.Fprintln(w, "\nnatscli against it (read-only server monitoring, after gpuaas login):")
	fmt.Fprintln(w, "  gpuaas ops nats-identity add --kind operator --name me --out ops.nk")
	fmt.Fprintln(w, "  nats --server "+url+" --nkey ops.nk server list")
	fmt.Fprintln(w, "  nats --server "+url+" --nkey ops.nk micro stats gpuaas")
	fmt.Fprintln(w, "\nPress Ctrl-C to stop.")
}
