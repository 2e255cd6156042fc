package app

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// printApp prints one published app, a field a line: its states (its
// trust is its image's) and its manifest, environment values included
// (a manifest is not a secret: `gpuaas secret` holds those).
func printApp(ios *cmdutil.IOStreams, a api.App) error {
	out := ios.Out
	fmt.Fprintf(out, "name:       %s (%s)\n", a.Name, a.ID)
	scope := a.Scope
	if a.Project != "" {
		scope += " " + a.Project
	}
	fmt.Fprintf(out, "scope:      %s\n", scope)
	fmt.Fprintf(out, "lifecycle:  %s\n", a.Lifecycle)
	fmt.Fprintf(out, "image:      %s (%s): %s, %s\n", a.Image, a.ImageID, a.ImageLifecycle, a.Trust)
	fmt.Fprintf(out, "ref:        %s\n", a.Ref)
	runnable := "no"
	if a.Runnable {
		runnable = "yes: `gpuaas app run " + a.Name + " --alloc ID`"
	}
	fmt.Fprintf(out, "runnable:   %s\n", runnable)
	m := a.Manifest
	if len(m.Command) > 0 {
		fmt.Fprintf(out, "command:    %s\n", strings.Join(append(append([]string{}, m.Command...), m.Args...), " "))
	}
	names := make([]string, 0, len(m.Env))
	for k := range m.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(out, "env:        %s=%s\n", k, m.Env[k])
	}
	for _, p := range m.Ports {
		fmt.Fprintf(out, "port:       %s %d/%s\n", p.Name, p.Port, p.Protocol)
	}
	gpus := "all of the allocation's"
	if m.GPUs >= 0 {
		gpus = fmt.Sprint(m.GPUs)
	}
	fmt.Fprintf(out, "gpus:       %s\n", gpus)
	if m.ShmBytes > 0 {
		fmt.Fprintf(out, "shm:        %d bytes\n", m.ShmBytes)
	}
	if p := m.Readiness; p != nil {
		what := fmt.Sprintf("tcp %d", p.Port)
		if p.HTTPPath != "" {
			what = fmt.Sprintf("http %d%s", p.Port, p.HTTPPath)
		}
		fmt.Fprintf(out, "readiness:  %s within %s\n", what, p.StartDeadline)
	}
	return nil
}
