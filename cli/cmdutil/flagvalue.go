package cmdutil

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/internal/clip"
)

// wants says what a flag of each of pflag's types takes.
var wants = map[string]string{
	"int": "a whole number", "int8": "a whole number", "int16": "a whole number",
	"int32": "a whole number", "int64": "a whole number",
	"uint": "a whole number, 0 or more", "uint8": "a whole number, 0 or more", "uint16": "a whole number, 0 or more",
	"uint32": "a whole number, 0 or more", "uint64": "a whole number, 0 or more",
	"float32": "a number", "float64": "a number",
	"bool":     "true or false",
	"duration": "a duration such as 90s, 5m or 1h30m",
	"count":    "a whole number",
}

// invalidFlagValue rewords pflag's "invalid argument "abc" for "--gpus"
// flag: strconv.ParseInt: parsing "abc": invalid syntax". A flag type of
// our own (--json's fields) explains itself: its message is kept.
func invalidFlagValue(e *pflag.InvalidValueError) error {
	fl := e.GetFlag()
	name := "--" + fl.Name
	value := clip.String(e.GetValue())
	if want, ok := wants[fl.Value.Type()]; ok {
		return fmt.Errorf("invalid value %q for %s: it takes %s", value, name, want)
	}
	cause := errors.Unwrap(e)
	if cause == nil {
		return fmt.Errorf("invalid value %q for %s", value, name)
	}
	return fmt.Errorf("%s: %w", name, cause)
}
