package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// The values shell completion asks the server for, by command path below
// the root. They are listed here, in one place, rather than in each verb's
// file, so that one table says which argument completes to what; a test
// checks that every entry names a command and flag of the tree.
var (
	// argCompletions complete a command's first argument.
	argCompletions = map[string]cmdutil.Lister{
		"alloc get":          cmdutil.AllocationIDs,
		"alloc top":          cmdutil.AllocationIDs,
		"alloc release":      cmdutil.AllocationIDs,
		"alloc wait":         cmdutil.AllocationIDs,
		"ssh":                cmdutil.AllocationIDs,
		"node get":           cmdutil.NodeNames,
		"node drain":         cmdutil.NodeNames,
		"node quarantine":    cmdutil.NodeNames,
		"node clear":         cmdutil.NodeNames,
		"node logs":          cmdutil.NodeNames,
		"node slots approve": cmdutil.NodeNames,
		"project use":        cmdutil.ProjectNames,
		"project members":    cmdutil.ProjectNames,
		"project add-member": cmdutil.ProjectNames,
		"session play":       cmdutil.SessionIDs,
	}
	// flagCompletions complete a flag's value: command path, then flag.
	flagCompletions = map[string]map[string]cmdutil.Lister{
		"alloc create":  {"sku": cmdutil.SKUs},
		"session list":  {"alloc": cmdutil.AllocationIDs},
		"billing usage": {"alloc": cmdutil.AllocationIDs},
		"watch":         {"alloc": cmdutil.AllocationIDs},
	}
)

// addCompletions registers the dynamic completions on root's tree, and
// completes the global --project with the user's projects. An entry that
// names no command or flag is skipped and reported in the error (a test
// fails on it; a CLI without one completion still works).
func addCompletions(root *cobra.Command, f *cmdutil.Factory) error {
	var errs []error
	if err := root.RegisterFlagCompletionFunc("project", cmdutil.CompleteWith(f, 0, cmdutil.ProjectNames)); err != nil {
		errs = append(errs, fmt.Errorf("complete --project: %w", err))
	}
	for path, list := range argCompletions {
		cmd, err := findCommand(root, path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cmd.ValidArgsFunction = cmdutil.CompleteWith(f, 1, list)
	}
	for path, flags := range flagCompletions {
		cmd, err := findCommand(root, path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for name, list := range flags {
			if err := cmd.RegisterFlagCompletionFunc(name, cmdutil.CompleteWith(f, 0, list)); err != nil {
				errs = append(errs, fmt.Errorf("complete %s --%s: %w", path, name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// findCommand returns the command at path (words below the root), exactly.
func findCommand(root *cobra.Command, path string) (*cobra.Command, error) {
	cmd, rest, err := root.Find(strings.Fields(path))
	if err != nil || len(rest) > 0 || cmd.CommandPath() != root.Name()+" "+path {
		return nil, fmt.Errorf("completion for %q: no such command", path)
	}
	return cmd, nil
}
