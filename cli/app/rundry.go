package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RunQuote is what `app run --dry-run` reports: the allocation's price
// per hour (the one --alloc runs at, or what --sku would rent), the app's
// own price per hour on top and the two together. The app's price is the
// server's rule (docs/apps.md, "Prices"): app.describe and image.get with
// run_order return what the run charges (api.RunPrice), so running a
// priced app's image directly, or under a project app of its name,
// quotes that app's price.
type RunQuote struct {
	AllocationID                string `json:"allocation_id,omitempty"`
	SKU                         string `json:"sku"`
	GPUs                        int    `json:"gpus"`
	AllocationPricePerHourMinor int64  `json:"allocation_price_per_hour_minor"`
	App                         string `json:"app,omitempty"`
	AppPricePerHourMinor        int64  `json:"app_price_per_hour_minor"`
	PricePerHourMinor           int64  `json:"price_per_hour_minor"`
	Currency                    string `json:"currency"`
}

// quoteRun is `app run --dry-run`: the price line, creating nothing. An
// app (or image) no workload may run is refused as the run would refuse
// it; an allocation not metered yet is priced at its SKU's price now.
func quoteRun(ctx context.Context, opts *RunOptions, client *api.Client) error {
	q := RunQuote{Currency: "usd"}
	// A run on an allocation names its app in the allocation's project
	// (app.run), whatever the default project is: so does its quote —
	// as the caller's project (the platform's apps still count), not as
	// -p (that project's apps only).
	if opts.Allocation != "" {
		a, err := client.AllocGet(ctx, opts.Allocation)
		if err != nil {
			return err
		}
		client = client.With(api.WithProject(a.ProjectID))
	}
	app, err := client.AppDescribe(ctx, api.AppRef{App: opts.Image, RunOrder: true})
	switch {
	case err == nil && app.Lifecycle == api.ImagePromoted:
		if !app.Runnable {
			return api.Errorf(api.CodeInvalidArgument, "app %s is %s, its image %s: a workload runs only promoted apps of promoted, verified images",
				app.Name, app.Lifecycle, app.Trust).WithHint("see `gpuaas app list`")
		}
		q.App = app.Name
		quoteApp(&q, app.RunPrice)
	case err != nil && !errors.Is(err, api.ErrNotFound):
		return err
	default:
		img, err := client.ImageGet(ctx, api.ImageRef{Image: opts.Image, RunOrder: true})
		if err != nil {
			return err
		}
		if !Runnable(*img) {
			return api.Errorf(api.CodeInvalidArgument, "image %s (%s) is %s and %s: a workload runs only promoted, verified images",
				img.Name, img.ID, img.Lifecycle, img.Trust).WithHint("see `gpuaas app list`")
		}
		quoteApp(&q, img.RunPrice)
	}
	if err := quoteAllocation(ctx, opts, client, &q); err != nil {
		return err
	}
	q.PricePerHourMinor = q.AllocationPricePerHourMinor + q.AppPricePerHourMinor
	if opts.Exporter != nil {
		return cmdutil.Narrowed(opts.Exporter, cmdutil.FieldsOf(RunQuote{})).Write(ctx, opts.IO, q)
	}
	_, err = fmt.Fprintln(opts.IO.Out, quoteLine(q))
	return err
}

// quoteApp puts the run's own price (the server's: nil from a controld
// that does not send it, then the quote keeps what it has) in q, naming the
// app whose price it is.
func quoteApp(q *RunQuote, p *api.RunPrice) {
	if p == nil {
		return
	}
	if p.App != "" {
		q.App = p.App
	}
	q.AppPricePerHourMinor = p.PricePerHourMinor
}

// quoteAllocation fills q's allocation part: with --alloc the price its
// meter runs at (its SKU's price now if it is not active yet), with --sku
// what alloc.quote prices the rent at.
func quoteAllocation(ctx context.Context, opts *RunOptions, client *api.Client, q *RunQuote) error {
	if opts.SKU != "" {
		aq, err := client.AllocQuote(ctx, api.AllocCreateRequest{SKU: opts.SKU, GPUs: opts.GPUs, Volumes: rentVolumes(opts.Mounts)})
		if err != nil {
			return fmt.Errorf("resources: %w", err)
		}
		q.SKU, q.GPUs, q.AllocationPricePerHourMinor, q.Currency = aq.SKU, aq.GPUs, aq.PricePerHourMinor, aq.Currency
		return nil
	}
	a, err := client.AllocGet(ctx, opts.Allocation)
	if err != nil {
		return err
	}
	q.AllocationID, q.SKU, q.GPUs = a.ID, a.SKU, a.GPUs
	u, err := client.BillingUsage(ctx, api.BillingUsageRequest{Allocation: a.ID})
	if err == nil && len(u.Usage) == 1 {
		q.AllocationPricePerHourMinor = u.Usage[0].PricePerGPUHourMinor * int64(u.Usage[0].GPUs)
		q.Currency = u.Usage[0].Currency
		return nil
	}
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return err
	}
	aq, err := client.AllocQuote(ctx, api.AllocCreateRequest{SKU: a.SKU, GPUs: a.GPUs})
	if err != nil {
		return err
	}
	q.AllocationPricePerHourMinor, q.Currency = aq.PricePerHourMinor, aq.Currency
	return nil
}

// quoteLine is the price line: "h100-baremetal (8 GPUs) $X/h + app
// jupyter $Y/h = $Z/h", the app part only for an app with a price.
func quoteLine(q RunQuote) string {
	s := fmt.Sprintf("%s (%d GPU(s)) %s/h", q.SKU, q.GPUs, api.FormatMoney(q.AllocationPricePerHourMinor, q.Currency))
	if q.AllocationID != "" {
		s = q.AllocationID + " " + s
	}
	if q.App != "" {
		s += fmt.Sprintf(" + app %s %s/h", q.App, api.FormatMoney(q.AppPricePerHourMinor, q.Currency))
	}
	return s + fmt.Sprintf(" = %s/h", api.FormatMoney(q.PricePerHourMinor, q.Currency))
}
