package daemon

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/daemonconfig"
)

// settingsHelp is the daemons' help paragraph about where their settings
// come from (internal/daemonconfig).
const settingsHelp = `Settings: every flag may also be a key of a YAML file given with --config,
the flag's long name being the key (log-level: debug; a list flag takes a
YAML list); a key no flag has is refused, with its line. A flag given on
the command line wins over its environment variable (above), which wins
over the file, which wins over the flag's default. --print-config prints
the settings in effect as such a file, each with where it came from and
secrets hidden, and exits.`

// settingsFlags are --config and --print-config, which every daemon has.
type settingsFlags struct {
	File  string
	Print bool
}

func (s *settingsFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.File, "config", "", "Settings `file` (YAML; its keys are these flags' long names)")
	fl.BoolVar(&s.Print, "print-config", false, "Print the settings in effect (flags, environment, --config file, defaults; secrets hidden) and exit")
}

// load applies the settings file, then the environment, to the flags the
// command line left alone. It reports whether --print-config printed the
// result to out, after which the command does nothing else.
func (s *settingsFlags) load(c *cobra.Command, out io.Writer, spec daemonconfig.Spec) (printed bool, err error) {
	spec.NotSettings = append(spec.NotSettings, "config", "print-config")
	settings, err := daemonconfig.Load(c.LocalFlags(), s.File, os.Getenv, spec)
	if err != nil {
		return false, cmdutil.FlagErrorf("settings: %v", err)
	}
	if !s.Print {
		return false, nil
	}
	return true, settings.Print(out)
}
