package api

import (
	"context"
	"time"
)

// EventApp tells who may see a published app that it changed; the Data is
// the App.
const EventApp = "app.state"

// App is a published app (docs/apps.md, "Publishing apps"): a stored,
// checked manifest of a catalog image, the platform's or a project's own,
// with a lifecycle of its own (published → promoted → deprecated →
// retired, the image lifecycle's states). Its trust is its image's, read
// when the app is read (docs/decisions/0051-published-apps.md): an app
// whose image is revoked or unverified does not run.
type App struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Scope     string `json:"scope"`
	ProjectID string `json:"project_id,omitempty"`
	Project   string `json:"project,omitempty"`
	Lifecycle string `json:"lifecycle"`
	// ImageID, Image and Ref are its image, pinned by digest at publish.
	ImageID string `json:"image_id"`
	Image   string `json:"image"`
	Ref     string `json:"ref"`
	Digest  string `json:"digest"`
	// ImageLifecycle and Trust are its image's states now.
	ImageLifecycle string      `json:"image_lifecycle"`
	Trust          string      `json:"trust"`
	Manifest       AppManifest `json:"manifest"`
	// Runnable: promoted, its image promoted and verified; `app run
	// NAME` runs it.
	Runnable bool `json:"runnable"`
	// PricePerHourMinor is the app's own price per hour, on top of its
	// allocation's (platform apps only, set by operators: docs/apps.md,
	// "Prices"); in the platform's currency.
	PricePerHourMinor int64 `json:"price_per_hour_minor"`
	// RunPrice is what a workload run of it is charged of its own, by
	// the server's rule: filled by app.describe with run_order only.
	RunPrice    *RunPrice `json:"run_price,omitempty"`
	PublishedBy string    `json:"published_by"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// RunPrice is the own price per hour a workload run of an app or image
// would carry (docs/apps.md, "Prices"; docs/decisions/0059-app-prices.md):
// the higher of the app's own price and that of the priced platform app
// whose image has the same digest or config digest (controld/apps'
// PricedImage), with the app whose price it is ("" and 0 when none is
// priced). `app run --dry-run` quotes it; the run charges it.
type RunPrice struct {
	App               string `json:"app,omitempty"`
	AppID             string `json:"app_id,omitempty"`
	PricePerHourMinor int64  `json:"price_per_hour_minor"`
}

// AppManifest is what a published app runs, from its app.yaml
// (internal/appspec): the command then its args, the environment, the
// ports it listens on, its GPUs (AppGPUsAll: every GPU of the allocation;
// 0: none), /dev/shm's size and its readiness probe.
type AppManifest struct {
	Command   []string          `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Ports     []AppPort         `json:"ports,omitempty"`
	GPUs      int               `json:"gpus"`
	ShmBytes  int64             `json:"shm_bytes,omitempty"`
	Readiness *WorkloadProbe    `json:"readiness,omitempty"`
}

// AppGPUsAll is an AppManifest's GPUs when the app gets every GPU of its
// allocation.
const AppGPUsAll = -1

// AppPort is a port a published app listens on (http or tcp).
type AppPort struct {
	Name     string `json:"name"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
}

// AppPublishRequest publishes the app manifest Manifest (app.yaml's text,
// read strictly by controld: internal/appspec). Platform publishes a
// platform app (operators and admins); otherwise it is Project's own
// (default: the caller's project; its owners publish).
type AppPublishRequest struct {
	Manifest string `json:"manifest"`
	Project  string `json:"project,omitempty"`
	Platform bool   `json:"platform,omitempty"`
}

// AppListRequest lists published apps: the runnable ones of the platform
// and of Project (default: the caller's); All lists every app the caller
// may see, whatever its states.
type AppListRequest struct {
	Project string `json:"project,omitempty"`
	All     bool   `json:"all,omitempty"`
}

// AppListResponse is app.list's answer.
type AppListResponse struct {
	Apps []App `json:"apps"`
}

// AppRef names one published app: its id, or its name, looked up in
// Project, or among the platform's with Platform; with neither, in the
// caller's project and the platform's, and a name in both is refused
// naming both (docs/apps.md, "Publishing apps").
type AppRef struct {
	App      string `json:"app"`
	Project  string `json:"project,omitempty"`
	Platform bool   `json:"platform,omitempty"`
	// RunOrder resolves a name as a run does, the caller's project's
	// entry first, then the platform's, instead of refusing a name seen
	// in both: the CLI's check before it rents for a run.
	RunOrder bool `json:"run_order,omitempty"`
}

// AppPublish publishes an app manifest.
func (c *Client) AppPublish(ctx context.Context, req AppPublishRequest, opts ...CallOption) (*App, error) {
	return Do(ctx, c, OpAppPublish, req, opts...)
}

// AppList lists published apps.
func (c *Client) AppList(ctx context.Context, req AppListRequest, opts ...CallOption) (*AppListResponse, error) {
	return Do(ctx, c, OpAppList, req, opts...)
}

// AppDescribe returns one published app.
func (c *Client) AppDescribe(ctx context.Context, req AppRef, opts ...CallOption) (*App, error) {
	return Do(ctx, c, OpAppDescribe, req, opts...)
}

// AppPromote promotes a published app: `app list` shows it, `app run
// NAME` runs it.
func (c *Client) AppPromote(ctx context.Context, req AppRef, opts ...CallOption) (*App, error) {
	return Do(ctx, c, OpAppPromote, req, opts...)
}

// AppDeprecate deprecates a published app: it no longer runs.
func (c *Client) AppDeprecate(ctx context.Context, req AppRef, opts ...CallOption) (*App, error) {
	return Do(ctx, c, OpAppDeprecate, req, opts...)
}

// AppRetire retires a published app for good.
func (c *Client) AppRetire(ctx context.Context, req AppRef, opts ...CallOption) (*App, error) {
	return Do(ctx, c, OpAppRetire, req, opts...)
}
