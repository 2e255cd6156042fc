package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// rentForApp is `app run --sku`: the allocation the app runs on, rented
// and waited for as `job run` rents one (cmdutil.Rent: the price line
// first, an unknown SKU or too little money refused before anything is
// created, Ctrl-C during the wait releases it). --gpus is then the
// allocation's size (the container gets all of it). It returns the
// allocation and a release for when the workload could not be created.
// The allocation is the renter's afterwards: it stays, and is charged,
// until `alloc release` (which stops and removes its workloads), as
// docs/decisions/0040-app-gpus-list-and-rent.md explains.
func rentForApp(ctx context.Context, opts *RunOptions, client *api.Client) (string, func(), error) {
	// An image no workload may run is refused before anything is rented
	// (controld checks it again at app.run).
	// A promoted app of that name wins over an image (docs/apps.md,
	// "Publishing apps").
	if app, err := client.AppDescribe(ctx, api.AppRef{App: opts.Image, RunOrder: true}); err == nil && app.Lifecycle == api.ImagePromoted {
		if !app.Runnable {
			return "", nil, api.Errorf(api.CodeInvalidArgument, "app %s is %s, its image %s: a workload runs only promoted apps of promoted, verified images; nothing was rented",
				app.Name, app.Lifecycle, app.Trust).WithHint("see `gpuaas app list`")
		}
	} else if err != nil && !errors.Is(err, api.ErrNotFound) {
		return "", nil, err
	} else if img, err := client.ImageGet(ctx, api.ImageRef{Image: opts.Image, RunOrder: true}); err != nil {
		return "", nil, err
	} else if !Runnable(*img) {
		return "", nil, api.Errorf(api.CodeInvalidArgument, "image %s (%s) is %s and %s: a workload runs only promoted, verified images; nothing was rented",
			img.Name, img.ID, img.Lifecycle, img.Trust).WithHint("see `gpuaas app list`")
	}
	key := api.NewIdempotencyKey()
	id, err := cmdutil.Rent(ctx, opts.IO, client, api.AllocCreateRequest{SKU: opts.SKU, GPUs: opts.GPUs,
		Volumes: rentVolumes(opts.Mounts)}, key, "app")
	if err != nil {
		return "", nil, err
	}
	release := func() {
		if _, err := client.AllocRelease(context.WithoutCancel(ctx), api.AllocReleaseRequest{ID: id}); err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "allocation %s was not released (%v): `gpuaas alloc release %s` does it\n", id, err, id)
			return
		}
		fmt.Fprintf(opts.IO.ErrOut, "allocation %s released: the app could not be started\n", id)
	}
	return id, release, nil
}

// rentedNote tells the renter the allocation rented for the app stays.
func rentedNote(ios *cmdutil.IOStreams, allocID string) {
	fmt.Fprintf(ios.ErrOut, "allocation %s was rented for this app: it stays, and is charged, until `gpuaas alloc release %s` (which stops and removes its workloads)\n",
		allocID, allocID)
}
