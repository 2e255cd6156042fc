package cmdutil

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/itchyny/gojq"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/internal/clip"
)

// allFields is what a bare --json stands for.
const allFields = "all"

// Exporter writes a command's data as JSON, through --jq or --template. It
// is nil in a command's options unless one of those flags was given, so
// commands read: if opts.Exporter != nil { return opts.Exporter.Write(...) }.
type Exporter interface {
	// Fields are the selected JSON fields.
	Fields() []string
	// Write prints data (a wire struct or a slice of them).
	Write(ctx context.Context, ios *IOStreams, data any) error
}

// AddJSONFlags adds --json [fields], --jq and --template to cmd. fields are
// the JSON names --json accepts (see FieldsOf); a bare --json selects them
// all. Once flags are parsed, *target is set when any of the three flags is
// given. Call it after cmd's Args, PreRunE and RunE are set: it wraps them.
func AddJSONFlags(cmd *cobra.Command, target *Exporter, fields []string) {
	sel := &fieldsValue{allowed: fields}
	var jq, tmpl string
	f := cmd.Flags()
	f.Var(sel, "json", "Output JSON with the given comma-separated `fields` (all when none given)")
	f.Lookup("json").NoOptDefVal = allFields
	f.StringVarP(&jq, "jq", "q", "", "Filter JSON output with a jq `expression` (implies --json)")
	f.StringVarP(&tmpl, "template", "t", "", "Format JSON output with a Go `template` (implies --json)")
	long := cmd.Long
	if long == "" {
		long = cmd.Short
	}
	cmd.Long = long + "\n\nJSON fields: " + strings.Join(fields, ", ")

	// pflag reads `--json id,state` as a bare --json followed by the
	// argument "id,state". When the arguments only make sense without such
	// a field list, adopt it as the selection, as gh users expect; when it
	// names a field that does not exist, say which one, not "unexpected
	// argument".
	validate := cmd.Args
	if validate == nil {
		validate = cobra.ArbitraryArgs
	}
	var rest []string // the arguments left once a field list was adopted
	cmd.Args = func(c *cobra.Command, a []string) error {
		err := validate(c, a)
		if err == nil || !sel.bare() {
			return err
		}
		// Of the arguments that could have been the field list but are
		// not, say what is wrong with the likeliest: the one naming the
		// most fields, else the last (--json goes last, mostly).
		var fieldErr error
		best := -1
		for i, arg := range a {
			others := slices.Delete(slices.Clone(a), i, i+1)
			if validate(c, others) != nil {
				continue
			}
			if setErr := sel.Set(arg); setErr != nil {
				sel.value = []string{allFields}
				if n := sel.known(arg); n >= best {
					best, fieldErr = n, FlagErrorf("--json: %v", setErr)
				}
				continue
			}
			rest = others
			return nil
		}
		if fieldErr != nil {
			return fieldErr
		}
		return err
	}
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, a []string) error {
			if rest != nil {
				a = rest
			}
			return run(c, a)
		}
	}

	preRun := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, a []string) error {
		if preRun != nil {
			if err := preRun(c, a); err != nil {
				return err
			}
		}
		if !c.Flags().Changed("json") && jq == "" && tmpl == "" {
			return nil
		}
		if jq != "" && tmpl != "" {
			return FlagErrorf("--jq and --template cannot be combined")
		}
		e := &jsonExporter{fields: sel.selected()}
		var err error
		if jq != "" {
			if e.jq, err = compileJQ(jq); err != nil {
				return FlagErrorWrap(err)
			}
		}
		if tmpl != "" {
			if e.tmpl, err = parseTemplate(tmpl); err != nil {
				return FlagErrorWrap(err)
			}
		}
		*target = e
		return nil
	}
}

type jsonExporter struct {
	fields []string
	jq     *gojq.Code
	tmpl   *template.Template
}

func (e *jsonExporter) Fields() []string { return e.fields }

func (e *jsonExporter) Write(ctx context.Context, ios *IOStreams, data any) error {
	v, err := toGeneric(data)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	v = pickFields(v, e.fields)
	switch {
	case e.jq != nil:
		return runJQ(ctx, ios.Out, e.jq, v)
	case e.tmpl != nil:
		return e.tmpl.Execute(ios.Out, v)
	}
	return writeJSON(ios.Out, v, ios.IsStdoutTTY())
}

// fieldsValue is the --json flag: a comma-separated subset of allowed.
type fieldsValue struct {
	allowed []string
	value   []string
}

var _ pflag.Value = (*fieldsValue)(nil)

func (v *fieldsValue) Type() string   { return "fields" }
func (v *fieldsValue) String() string { return strings.Join(v.value, ",") }

func (v *fieldsValue) Set(s string) error {
	if s == allFields {
		v.value = []string{allFields}
		return nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(v.allowed, f) {
			return fmt.Errorf("unknown JSON field %q; available: %s", clip.String(f), strings.Join(v.allowed, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("no JSON fields given; available: %s", strings.Join(v.allowed, ", "))
	}
	v.value = out
	return nil
}

// known counts the fields of the comma-separated list s that exist.
func (v *fieldsValue) known(s string) int {
	n := 0
	for _, f := range strings.Split(s, ",") {
		if slices.Contains(v.allowed, strings.TrimSpace(f)) {
			n++
		}
	}
	return n
}

func (v *fieldsValue) bare() bool { return slices.Equal(v.value, []string{allFields}) }

func (v *fieldsValue) selected() []string {
	if len(v.value) == 0 || v.bare() {
		return v.allowed
	}
	return v.value
}

// Narrowed returns e selecting only those of its fields that are in keep:
// for a command with two outputs (`app run` and its --dry-run quote)
// whose --json accepts the fields of both, each output shows its own.
func Narrowed(e Exporter, keep []string) Exporter {
	je, ok := e.(*jsonExporter)
	if !ok {
		return e
	}
	c := *je
	c.fields = nil
	for _, f := range je.fields {
		if slices.Contains(keep, f) {
			c.fields = append(c.fields, f)
		}
	}
	return &c
}
