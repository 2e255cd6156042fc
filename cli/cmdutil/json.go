package cmdutil

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/template"

	"github.com/itchyny/gojq"
)

// FieldsOf returns the JSON field names of a struct value or type, in
// declaration order: the names --json accepts for it.
func FieldsOf(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	var fields []string
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = sf.Name
		}
		fields = append(fields, name)
	}
	return fields
}

// toGeneric turns wire structs into what gojq and templates walk: maps,
// slices, strings, json.Number. A nil slice becomes an empty list.
func toGeneric(data any) (any, error) {
	if rv := reflect.ValueOf(data); rv.Kind() == reflect.Slice && rv.IsNil() {
		return []any{}, nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep int64 money and ids exact
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// pickFields keeps only fields of an object, or of each object in a list.
// A requested field the value omitted (omitempty) comes out as null.
func pickFields(v any, fields []string) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			out[f] = v[f]
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = pickFields(e, fields)
		}
		return out
	}
	return v
}

func writeJSON(w io.Writer, v any, indent bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// runJQ prints each result of query on its own line; strings print raw, as
// with `jq -r`.
func runJQ(ctx context.Context, w io.Writer, query *gojq.Code, v any) error {
	iter := query.RunWithContext(ctx, v)
	for {
		r, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, ok := r.(error); ok {
			if err, ok := err.(*gojq.HaltError); ok && err.Value() == nil {
				return nil
			}
			return fmt.Errorf("jq: %w", err)
		}
		if s, ok := r.(string); ok {
			if _, err := fmt.Fprintln(w, s); err != nil {
				return err
			}
			continue
		}
		b, err := gojq.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
			return err
		}
	}
}

func compileJQ(expr string) (*gojq.Code, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("--jq: %w", err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("--jq: %w", err)
	}
	return code, nil
}

// templateFuncs are the helpers --template offers besides text/template's
// own: json (compact JSON of a value), join (a list with a separator) and
// upper.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		var b bytes.Buffer
		if err := writeJSON(&b, v, false); err != nil {
			return "", err
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	},
	"join": func(sep string, v any) string {
		list, _ := v.([]any) // null joins to ""
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, sep)
	},
	"upper": strings.ToUpper,
}

func parseTemplate(text string) (*template.Template, error) {
	t, err := template.New("--template").Funcs(templateFuncs).Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("--template: %w", err)
	}
	return t, nil
}
