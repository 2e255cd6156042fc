package cmdutil

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

type widget struct {
	ID      string    `json:"id"`
	Count   int64     `json:"count"`
	Tags    []string  `json:"tags"`
	Note    string    `json:"note,omitempty"`
	Created time.Time `json:"created_at"`
	Hidden  string    `json:"-"`
}

var widgets = []widget{
	{ID: "w-1", Count: 9007199254740993, Tags: []string{"a", "b"}, Created: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
	{ID: "w-2", Count: 2, Note: "hi", Created: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
}

// parseExport runs a command with one optional argument through
// AddJSONFlags and returns the exporter it ended up with and the arguments
// RunE saw.
func parseExport(t *testing.T, args ...string) (Exporter, []string, error) {
	t.Helper()
	var exp Exporter
	var got []string
	cmd := &cobra.Command{
		Use:  "widgets",
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, a []string) error { got = a; return nil },
	}
	AddJSONFlags(cmd, &exp, FieldsOf(widget{}))
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return exp, got, err
}

func TestFieldsOf(t *testing.T) {
	got := FieldsOf([]widget{})
	want := []string{"id", "count", "tags", "note", "created_at"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
}

func TestAddJSONFlagsParsing(t *testing.T) {
	all := FieldsOf(widget{})
	tests := []struct {
		name       string
		args       []string
		wantFields []string // nil: no exporter
		wantArgs   []string
		wantErr    bool
	}{
		{name: "no flags", args: []string{"x"}, wantArgs: []string{"x"}},
		{name: "bare --json", args: []string{"--json"}, wantFields: all},
		{name: "--json=fields", args: []string{"--json=id,tags"}, wantFields: []string{"id", "tags"}},
		{name: "--json fields as gh users write it", args: []string{"--json", "id,count", "x"}, wantFields: []string{"id", "count"}, wantArgs: []string{"x"}},
		{name: "argument after bare --json stays an argument when it fits", args: []string{"--json", "id"}, wantFields: all, wantArgs: []string{"id"}},
		{name: "--jq implies all fields", args: []string{"--jq", ".[0].id"}, wantFields: all},
		{name: "--template implies all fields", args: []string{"-t", "{{.}}"}, wantFields: all},
		{name: "unknown field", args: []string{"--json=id,nope"}, wantErr: true},
		{name: "empty field list", args: []string{"--json=,"}, wantErr: true},
		{name: "bad jq", args: []string{"--jq", ".["}, wantErr: true},
		{name: "bad template", args: []string{"--template", "{{.x"}, wantErr: true},
		{name: "jq and template", args: []string{"--jq", ".", "--template", "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp, args, err := parseExport(t, tt.args...)
			if tt.wantErr {
				if err == nil {
					t.Fatal("got no error; want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(args, tt.wantArgs) {
				t.Errorf("got args %q; want %q", args, tt.wantArgs)
			}
			switch {
			case tt.wantFields == nil && exp != nil:
				t.Errorf("got an exporter with %v; want none", exp.Fields())
			case tt.wantFields != nil && exp == nil:
				t.Errorf("got no exporter; want fields %v", tt.wantFields)
			case exp != nil && !slices.Equal(exp.Fields(), tt.wantFields):
				t.Errorf("got fields %v; want %v", exp.Fields(), tt.wantFields)
			}
		})
	}
}

func TestJQAndTemplateErrorsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--jq", ".["}, {"--template", "{{"}, {"--jq", ".", "-t", "x"}} {
		_, _, err := parseExport(t, args...)
		var fe *FlagError
		if !errors.As(err, &fe) {
			t.Errorf("%v: got %v; want a FlagError", args, err)
		}
	}
}

func TestExporterWrite(t *testing.T) {
	tests := []struct {
		name string
		args []string
		tty  bool
		data any
		want string
	}{
		{"piped list, chosen fields", []string{"--json=id,note"}, false, widgets,
			`[{"id":"w-1","note":null},{"id":"w-2","note":"hi"}]` + "\n"},
		{"tty object is indented", []string{"--json=id,count"}, true, widgets[0],
			"{\n  \"count\": 9007199254740993,\n  \"id\": \"w-1\"\n}\n"},
		{"all fields include omitted ones", []string{"--json"}, false, widgets[0],
			`{"count":9007199254740993,"created_at":"2030-01-02T03:04:05Z","id":"w-1","note":null,"tags":["a","b"]}` + "\n"},
		{"nil list is empty", []string{"--json=id"}, false, []widget(nil), "[]\n"},
		{"jq prints strings raw", []string{"--jq", ".[].id"}, false, widgets, "w-1\nw-2\n"},
		{"jq keeps big numbers exact", []string{"--jq", ".[0].count"}, false, widgets, "9007199254740993\n"},
		{"jq on chosen fields", []string{"--json=id", "--jq", ".[0]"}, false, widgets, `{"id":"w-1"}` + "\n"},
		{"template", []string{"--template", `{{range .}}{{.id}} {{upper .id}} {{join "," .tags}} {{json .tags}}{{"\n"}}{{end}}`}, false, widgets,
			"w-1 W-1 a,b [\"a\",\"b\"]\nw-2 W-2  null\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp, _, err := parseExport(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			ios, _, out, _ := Test()
			ios.SetStdoutTTY(tt.tty)
			if err := exp.Write(context.Background(), ios, tt.data); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%s; want\n%s", got, tt.want)
			}
		})
	}
}

func TestJQRuntimeError(t *testing.T) {
	exp, _, err := parseExport(t, "--jq", `error("boom")`)
	if err != nil {
		t.Fatal(err)
	}
	ios, _, _, _ := Test()
	if err := exp.Write(context.Background(), ios, widgets); err == nil {
		t.Error("got no error; want the jq error")
	}
}
