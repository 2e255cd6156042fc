package api

import (
	"context"
	"regexp"
	"time"
)

// Project secrets (docs/jobs.md "Secrets", docs/decisions/0028-project-secrets.md):
// values a job's env names as secret:NAME, kept sealed by controld and
// delivered only to the node that runs the job. The API is write-only:
// no endpoint returns a value.

// EventSecret tells a project's members one of its secrets was set or
// removed; the Data is a Secret (its name, never its value).
const EventSecret = "secret.changed"

// MaxSecretBytes bounds one secret's value.
const MaxSecretBytes = 64 << 10

// MaxSecretsPerProject bounds how many secrets a project keeps.
const MaxSecretsPerProject = 200

// secretNameRE is a secret's name: jobspec's secret: references take the
// same form.
var secretNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckSecretName refuses a name no secret can have.
func CheckSecretName(name string) error {
	if !secretNameRE.MatchString(name) {
		return Errorf(CodeInvalidArgument, "name %q is not a secret name", name).
			WithHint("use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// Secret is a secret as listed: never its value. Digest is a short
// fingerprint of the value under controld's key (equal values of the
// same name in the same project have the same digest), enough to tell
// whether it changed.
type Secret struct {
	ProjectID string     `json:"project_id"`
	Name      string     `json:"name"`
	Size      int        `json:"size"`
	Digest    string     `json:"digest"`
	SetBy     string     `json:"set_by"`
	SetAt     time.Time  `json:"set_at"`
	RemovedAt *time.Time `json:"removed_at,omitempty"`
}

// SecretSetRequest sets a secret of a project (Project, or the
// Gpuaas-Project header, or the caller's default project).
type SecretSetRequest struct {
	Project string `json:"project,omitempty"`
	Name    string `json:"name"`
	Value   []byte `json:"value"`
}

// SecretListRequest lists a project's secrets.
type SecretListRequest struct {
	Project string `json:"project,omitempty"`
}

// SecretList is secret.list's answer, by name, with the project's name.
type SecretList struct {
	Project string   `json:"project"`
	Secrets []Secret `json:"secrets"`
}

// SecretRemoveRequest removes a secret of a project.
type SecretRemoveRequest struct {
	Project string `json:"project,omitempty"`
	Name    string `json:"name"`
}

// SecretSet sets a secret.
func (c *Client) SecretSet(ctx context.Context, req SecretSetRequest, opts ...CallOption) (*Secret, error) {
	return Do(ctx, c, OpSecretSet, req, opts...)
}

// SecretList lists a project's secrets.
func (c *Client) SecretList(ctx context.Context, req SecretListRequest) (*SecretList, error) {
	return Do(ctx, c, OpSecretList, req)
}

// SecretRemove removes a secret.
func (c *Client) SecretRemove(ctx context.Context, req SecretRemoveRequest, opts ...CallOption) (*Secret, error) {
	return Do(ctx, c, OpSecretRemove, req, opts...)
}
