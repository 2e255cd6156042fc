package api

// Endpoints of published apps (docs/apps.md, "Publishing apps"), declared
// once each (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointAppPublish   = "app.publish"
	EndpointAppList      = "app.list"
	EndpointAppDescribe  = "app.describe"
	EndpointAppPromote   = "app.promote"
	EndpointAppDeprecate = "app.deprecate"
	EndpointAppRetire    = "app.retire"
)

var (
	// OpAppPublish is app.publish: stores an app manifest (app.yaml, read
	// strictly) with its catalog image pinned by digest, published: the
	// platform's (operators and admins) or a project's own (its owners).
	OpAppPublish = NewMutation[AppPublishRequest, App](EndpointAppPublish, LoggedIn)
	// OpAppList is app.list: the published apps a workload may run now
	// (promoted, image promoted and verified), the platform's and the
	// project's own; with all, every app the caller may see.
	OpAppList = NewQuery[AppListRequest, AppListResponse](EndpointAppList, LoggedIn)
	// OpAppDescribe is app.describe: one published app, its manifest, its
	// lifecycle and its image's trust.
	OpAppDescribe = NewQuery[AppRef, App](EndpointAppDescribe, LoggedIn)
	// OpAppPromote is app.promote: a published app whose image is verified
	// becomes runnable (operators and admins; a project's owners for its
	// own).
	OpAppPromote = NewMutation[AppRef, App](EndpointAppPromote, LoggedIn)
	// OpAppDeprecate is app.deprecate: a published or promoted app stops
	// being offered and run; workloads running it keep running.
	OpAppDeprecate = NewMutation[AppRef, App](EndpointAppDeprecate, LoggedIn)
	// OpAppRetire is app.retire: an app is retired for good; its name stays
	// taken.
	OpAppRetire = NewMutation[AppRef, App](EndpointAppRetire, LoggedIn)
)
