package api

import (
	"context"
	"time"
)

// The image catalog (docs/images.md): OCI images pinned by digest, with two
// independent state machines, lifecycle and trust. Users run promoted and
// verified platform images, and their project's own.

// Image lifecycle states: published → promoted → deprecated → retired.
const (
	ImagePublished  = "published"
	ImagePromoted   = "promoted"
	ImageDeprecated = "deprecated"
	ImageRetired    = "retired"
)

// Image trust states: unverified → verified | failed_verification, and
// revoked from any of them, for good.
const (
	TrustUnverified         = "unverified"
	TrustVerified           = "verified"
	TrustFailedVerification = "failed_verification"
	TrustRevoked            = "revoked"
)

// Image scopes: one of the platform's, or private to a project.
const (
	ImageScopePlatform = "platform"
	ImageScopeProject  = "project"
)

// ImagePlatform is the one platform images are checked for.
const ImagePlatform = "linux/amd64"

// EventImage tells an image changed state; the payload is the Image. The
// members of a project-private image's project are told.
const EventImage = "image.state"

// Image is a catalog entry. Ref is REPOSITORY@sha256:…, the only way the
// image is ever fetched; Source is what the publisher gave (a tag, once).
type Image struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Scope       string     `json:"scope"`
	ProjectID   string     `json:"project_id,omitempty"`
	Project     string     `json:"project,omitempty"`
	Ref         string     `json:"ref"`
	Digest      string     `json:"digest"`
	Source      string     `json:"source,omitempty"`
	Lifecycle   string     `json:"lifecycle"`
	Trust       string     `json:"trust"`
	TrustReason string     `json:"trust_reason,omitempty"`
	Platform    string     `json:"platform,omitempty"`
	SizeBytes   int64      `json:"size_bytes,omitempty"`
	Layers      int        `json:"layers,omitempty"`
	VerifiedAt  *time.Time `json:"verified_at,omitempty"`
	PublishedBy string     `json:"published_by,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// Verification is the verification asked for and not yet recorded
	// (image.verify queues one; a controld replica runs it); nil when
	// none is pending.
	Verification *ImageVerification `json:"verification,omitempty"`
	// RunPrice is what a workload run of it is charged of its own (the
	// priced platform app whose image has its digest): filled by
	// image.get with run_order only.
	RunPrice *RunPrice `json:"run_price,omitempty"`
}

// ImageVerification is a pending verification of an image: when it was
// asked for, how many attempts began, and the registry error that
// deferred the last one to NextAttemptAt ("" before any failed).
type ImageVerification struct {
	RequestedAt   time.Time `json:"requested_at"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
}

// ImageListRequest lists images. Project names the project whose own
// images are listed (default: the caller's project); All (operators and
// admins) lists every image in every state.
type ImageListRequest struct {
	Project string `json:"project,omitempty"`
	All     bool   `json:"all,omitempty"`
}

// ImageListResponse is image.list's answer.
type ImageListResponse struct {
	Images []Image `json:"images"`
}

// ImageRef names one image: its id, or its name, looked up in Project,
// or among the platform's with Platform; with neither, in the caller's
// project and the platform's, and a name in both is refused naming both
// (docs/images.md, "Commands").
type ImageRef struct {
	Image    string `json:"image"`
	Project  string `json:"project,omitempty"`
	Platform bool   `json:"platform,omitempty"`
	// RunOrder resolves a name as a run does, the caller's project's
	// entry first, then the platform's, instead of refusing a name seen
	// in both: the CLI's check before it rents for a run.
	RunOrder bool `json:"run_order,omitempty"`
}

// ImagePublishRequest adds an image. Ref is REPOSITORY@sha256:… or
// REPOSITORY:TAG (resolved to its digest once, now). Platform publishes a
// platform image (operators); otherwise it is Project's own.
type ImagePublishRequest struct {
	Name     string `json:"name"`
	Ref      string `json:"ref"`
	Project  string `json:"project,omitempty"`
	Platform bool   `json:"platform,omitempty"`
}

// ImageChangeRequest moves an image in one of its state machines (named
// as ImageRef names it); Reason is recorded with a revoke (and shown).
type ImageChangeRequest struct {
	Image    string `json:"image"`
	Project  string `json:"project,omitempty"`
	Platform bool   `json:"platform,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ImageRegistryResponse names the registry controld is configured with
// ("" when none).
type ImageRegistryResponse struct {
	Registry string `json:"registry"`
}

// ImageList lists the images the caller may see.
func (c *Client) ImageList(ctx context.Context, req ImageListRequest) (*ImageListResponse, error) {
	return Do(ctx, c, OpImageList, req)
}

// ImageGet returns one image.
func (c *Client) ImageGet(ctx context.Context, req ImageRef) (*Image, error) {
	return Do(ctx, c, OpImageGet, req)
}

// ImagePublish adds an image to the catalog.
func (c *Client) ImagePublish(ctx context.Context, req ImagePublishRequest, opts ...CallOption) (*Image, error) {
	return Do(ctx, c, OpImagePublish, req, opts...)
}

// ImageRegistry names controld's registry.
func (c *Client) ImageRegistry(ctx context.Context) (*ImageRegistryResponse, error) {
	return Do(ctx, c, OpImageRegistry, Empty{})
}

// ImageVerify checks an image against the registry and records the result.
func (c *Client) ImageVerify(ctx context.Context, req ImageChangeRequest, opts ...CallOption) (*Image, error) {
	return Do(ctx, c, OpImageVerify, req, opts...)
}

// ImagePromote offers a verified image to users.
func (c *Client) ImagePromote(ctx context.Context, req ImageChangeRequest, opts ...CallOption) (*Image, error) {
	return Do(ctx, c, OpImagePromote, req, opts...)
}

// ImageDeprecate deprecates an image.
func (c *Client) ImageDeprecate(ctx context.Context, req ImageChangeRequest, opts ...CallOption) (*Image, error) {
	return Do(ctx, c, OpImageDeprecate, req, opts...)
}

// ImageRetire retires an image.
func (c *Client) ImageRetire(ctx context.Context, req ImageChangeRequest, opts ...CallOption) (*Image, error) {
	return Do(ctx, c, OpImageRetire, req, opts...)
}

// ImageRevoke revokes an image's trust.
func (c *Client) ImageRevoke(ctx context.Context, req ImageChangeRequest, opts ...CallOption) (*Image, error) {
	return Do(ctx, c, OpImageRevoke, req, opts...)
}

// RunRefusal is why no new what ("job", "workload") may run the image,
// or nil when one may: it is verified and promoted. A revoked image is
// refused first, then one not verified, then one not promoted, each with
// the hint that helps. A job's refusal names its job.yaml field
// ("image: …", docs/jobs.md "Images"); a workload's names the image
// ("image …", docs/apps.md). controld checks it when a job or workload is
// submitted and again when a queued or retried job is started; the CLI
// checks it before renting.
func (i Image) RunRefusal(what string) error {
	lead := "image "
	if what == "job" {
		lead = "image: "
	}
	switch {
	case i.Trust == TrustRevoked:
		return Errorf(CodeInvalidArgument, "%s%s (%s) is revoked: no new %s runs it", lead, i.Name, i.ID, what).
			WithHint("choose another image: `gpuaas image list`")
	case i.Trust != TrustVerified:
		return Errorf(CodeInvalidArgument, "%s%s (%s) is %s, not verified: a %s runs only verified images", lead, i.Name, i.ID, i.Trust, what).
			WithHint("`gpuaas image verify " + i.Name + "`, then promote it")
	case i.Lifecycle != ImagePromoted:
		return Errorf(CodeInvalidArgument, "%s%s (%s) is %s, not promoted: a %s runs only promoted images", lead, i.Name, i.ID, i.Lifecycle, what).
			WithHint("`gpuaas image promote " + i.Name + "`")
	}
	return nil
}

// StateLine is the image's two states in words, with the trust's reason
// ("promoted, failed_verification (layer 1: digest mismatch)").
func (i Image) StateLine() string {
	s := i.Lifecycle + ", " + i.Trust
	if i.TrustReason != "" {
		s += " (" + i.TrustReason + ")"
	}
	if i.Verification != nil {
		s += ", verification queued"
	}
	return s
}
