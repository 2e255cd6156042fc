package api

// Endpoint names of project secrets (docs/jobs.md "Secrets").
const (
	EndpointSecretSet    = "secret.set"
	EndpointSecretList   = "secret.list"
	EndpointSecretRemove = "secret.rm"
)

var (
	// OpSecretSet is secret.set: a project's owner or member stores a
	// secret's value (at most MaxSecretBytes), sealed at rest, replacing
	// any value of that name; the reply and the audit name it, never the
	// value.
	OpSecretSet = NewMutation[SecretSetRequest, Secret](EndpointSecretSet, LoggedIn)
	// OpSecretList is secret.list: a project's secrets by name, who set
	// them, when, their size and digest (owners, members and viewers);
	// never a value.
	OpSecretList = NewQuery[SecretListRequest, SecretList](EndpointSecretList, LoggedIn)
	// OpSecretRemove is secret.rm: a project's owner or member removes a
	// secret; jobs that name it are refused from then on.
	OpSecretRemove = NewMutation[SecretRemoveRequest, Secret](EndpointSecretRemove, LoggedIn)
)
