package cmdutil

import "github.com/spf13/cobra"

// AnnotationLocalOnly marks a command that is not served over SSH
// (`ssh gpuaas@gateway <command>`), with the reason as its value: it acts
// on the machine it runs on (config files, OpenSSH, daemons), which over
// SSH would be the gateway's. Every other command is served over SSH too;
// a subcommand of a local-only command is local-only.
const AnnotationLocalOnly = "gpuaas/local-only"

// LocalOnly marks cmd as not served over SSH, for reason, and returns it.
func LocalOnly(cmd *cobra.Command, reason string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[AnnotationLocalOnly] = reason
	return cmd
}

// IsLocalOnly reports whether cmd, or a command above it, is marked
// LocalOnly, and why.
func IsLocalOnly(cmd *cobra.Command) (reason string, ok bool) {
	for c := cmd; c != nil; c = c.Parent() {
		if reason, ok := c.Annotations[AnnotationLocalOnly]; ok {
			return reason, true
		}
	}
	return "", false
}
