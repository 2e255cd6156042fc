package controld

import (
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
)

// tokenEndpoints are what a token may call: a project's work, read or
// done with the token's project role. Everything else — credentials
// (tokens, SSH certificates, logins), project administration, money,
// operator and admin endpoints — is refused before its handler runs, so
// an endpoint added later is refused to tokens until it is listed here.
var tokenEndpoints = map[string]bool{
	api.EndpointAuthWhoami:       true,
	api.EndpointCatalogList:      true,
	api.EndpointSSHCAs:           true,
	api.EndpointEventsSince:      true,
	api.EndpointProjectList:      true,
	api.EndpointProjectMembers:   true,
	api.EndpointAllocCreate:      true,
	api.EndpointAllocGet:         true,
	api.EndpointAllocList:        true,
	api.EndpointAllocQuote:       true,
	api.EndpointAllocRelease:     true,
	api.EndpointAllocTop:         true,
	api.EndpointBillingBalance:   true,
	api.EndpointBillingLedger:    true,
	api.EndpointBillingUsage:     true,
	api.EndpointBillingBudgetGet: true,
	api.EndpointSessionList:      true,
	api.EndpointSessionGet:       true,
	// A pipeline's work: jobs, volumes, images to publish and check,
	// webhooks to read (adding one is a project owner's: tokens never are).
	api.EndpointJobCreate:         true,
	api.EndpointJobGet:            true,
	api.EndpointJobList:           true,
	api.EndpointJobCancel:         true,
	api.EndpointJobLogs:           true,
	api.EndpointSecretList:        true, // names only: a pipeline checks what its jobs name
	api.EndpointVolumeCreate:      true,
	api.EndpointVolumeGet:         true,
	api.EndpointVolumeList:        true,
	api.EndpointVolumeResize:      true,
	api.EndpointVolumeRemove:      true,
	api.EndpointVolumeAttach:      true,
	api.EndpointVolumeDetach:      true,
	api.EndpointVolumeQuote:       true,
	api.EndpointImageList:         true,
	api.EndpointImageGet:          true,
	api.EndpointImageRegistry:     true,
	api.EndpointImagePublish:      true,
	api.EndpointImageVerify:       true,
	api.EndpointWebhookList:       true,
	api.EndpointWebhookDeliveries: true,
	// Apps: a pipeline runs and follows its project's workloads.
	api.EndpointAppRun:  true,
	api.EndpointAppPs:   true,
	api.EndpointAppGet:  true,
	api.EndpointAppStop: true,
	api.EndpointAppRm:   true,
	api.EndpointAppLogs: true,
	// A pipeline serves a port it started (a model server under test).
	api.EndpointExposeCreate: true,
	api.EndpointExposeList:   true,
	api.EndpointExposeRemove: true,
}

// errTokenRefused refuses a token what only a person's session may do.
func errTokenRefused(name string) error {
	return api.Errorf(api.CodeForbidden, "a token cannot call %s: tokens work in their project only", name).
		WithHint("run `gpuaas login` and use your own session for this")
}

// tokenRefused reports whether p, a token, is refused endpoint name.
func tokenRefused(p *identity.Principal, name string) error {
	if p == nil || p.TokenID == "" || tokenEndpoints[name] {
		return nil
	}
	return errTokenRefused(name)
}
