package api

// Endpoints of the image catalog (docs/images.md). Each is declared here
// once: its name (Subject(name) is its subject; audit rows and logs name
// it so) and its descriptor, with its request and response types, access
// level and kind (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
// Who may change an image is decided in controld/images (Decide): operators
// and admins for platform images, a project's owners for its own.
const (
	EndpointImageDeprecate = "image.deprecate"
	EndpointImageGet       = "image.get"
	EndpointImageList      = "image.list"
	EndpointImagePromote   = "image.promote"
	EndpointImagePublish   = "image.publish"
	EndpointImageRegistry  = "image.registry"
	EndpointImageRetire    = "image.retire"
	EndpointImageRevoke    = "image.revoke"
	EndpointImageVerify    = "image.verify"
)

var (
	// OpImageDeprecate is image.deprecate: marks a published or promoted
	// image deprecated (still usable where it runs, no longer offered).
	OpImageDeprecate = NewMutation[ImageChangeRequest, Image](EndpointImageDeprecate, LoggedIn)
	// OpImageGet is image.get: returns one image the caller may see.
	OpImageGet = NewQuery[ImageRef, Image](EndpointImageGet, LoggedIn)
	// OpImageList is image.list: lists the promoted and verified platform
	// images and the images of the caller's project (operators: every
	// image with All).
	OpImageList = NewQuery[ImageListRequest, ImageListResponse](EndpointImageList, LoggedIn)
	// OpImagePromote is image.promote: offers a verified image to users.
	OpImagePromote = NewMutation[ImageChangeRequest, Image](EndpointImagePromote, LoggedIn)
	// OpImagePublish is image.publish: adds an image to the catalog by
	// digest (a tag is resolved once, here), unverified.
	OpImagePublish = NewMutation[ImagePublishRequest, Image](EndpointImagePublish, LoggedIn)
	// OpImageRegistry is image.registry: names the registry controld
	// verifies against, where `image import` pushes.
	OpImageRegistry = NewQuery[Empty, ImageRegistryResponse](EndpointImageRegistry, LoggedIn)
	// OpImageRetire is image.retire: retires an image for good.
	OpImageRetire = NewMutation[ImageChangeRequest, Image](EndpointImageRetire, LoggedIn)
	// OpImageRevoke is image.revoke: revokes an image's trust for good (no
	// new workload may use it).
	OpImageRevoke = NewMutation[ImageChangeRequest, Image](EndpointImageRevoke, LoggedIn)
	// OpImageVerify is image.verify: queues a verification (answered at
	// once, with Image.Verification set); a controld replica then fetches
	// the image's manifest, config and layers by digest from the
	// registry, checks platform, sizes and digests, and records the
	// result and its reason. A registry that cannot be reached is retried
	// with backoff, its error shown on the image.
	OpImageVerify = NewMutation[ImageChangeRequest, Image](EndpointImageVerify, LoggedIn)
)
