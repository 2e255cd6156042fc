package controld

import (
	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/internal/api"
)

// appKind is the app catalog as images.FindEntry reads it.
var appKind = images.Kind[api.App]{Catalog: apps.Apps, ByID: apps.ByID, Visible: apps.Visible,
	Scope: func(a api.App) (string, string) { return a.ProjectID, a.Project },
	Runs:  func(a api.App) bool { return a.Lifecycle == api.ImagePromoted }}
