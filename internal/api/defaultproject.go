package api

import "context"

// The default project (issue [3/7] §1): a user preference kept by
// controld, so it follows the user to any machine and over SSH. A request
// that names no project (no project in its body, no Gpuaas-Project header)
// acts in it, where a project is needed; listings without a project still
// span all of the caller's projects.
const (
	// EventDefaultProject tells a user their default project changed; the
	// payload is the Project.
	EventDefaultProject = "project.default"
)

// ProjectUseRequest names the project, by name or id, to make the
// caller's default. The caller must belong to it.
type ProjectUseRequest struct {
	Project string `json:"project"`
}

// ProjectUse makes project (a name or id) the caller's default project
// and returns it, with the caller's role.
func (c *Client) ProjectUse(ctx context.Context, project string, opts ...CallOption) (*Project, error) {
	return Do(ctx, c, OpProjectUse, ProjectUseRequest{Project: project}, opts...)
}
