package context

import (
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func TestList(t *testing.T) {
	tests := []struct {
		name    string
		tty     bool
		args    []string
		context string // --context
		envCtx  string // GPUAAS_CONTEXT
		want    string
	}{
		{name: "table on a terminal", tty: true, want: "" +
			"   NAME  SERVER                         USER             PROJECT  SESSION\n" +
			"*  dev   nats://127.0.0.1:4222          ada@example.com  ml       until in 2h\n" +
			"   prod  tls://gpuaas.example.com:4222                            expired\n"},
		{name: "tab-separated when piped", want: "" +
			"*\tdev\tnats://127.0.0.1:4222\tada@example.com\tml\t2030-01-10T14:00:00Z\n" +
			"\tprod\ttls://gpuaas.example.com:4222\t\t\texpired\n"},
		{name: "--context marks the one in use", context: "prod", want: "" +
			"\tdev\tnats://127.0.0.1:4222\tada@example.com\tml\t2030-01-10T14:00:00Z\n" +
			"*\tprod\ttls://gpuaas.example.com:4222\t\t\texpired\n"},
		{name: "GPUAAS_CONTEXT marks the one in use", envCtx: "prod", want: "" +
			"\tdev\tnats://127.0.0.1:4222\tada@example.com\tml\t2030-01-10T14:00:00Z\n" +
			"*\tprod\ttls://gpuaas.example.com:4222\t\t\texpired\n"},
		{name: "--json fields, piped", args: []string{"--json", "name,current,logged_in"},
			want: `[{"current":true,"logged_in":true,"name":"dev"},{"current":false,"logged_in":false,"name":"prod"}]` + "\n"},
		{name: "--json fields, on a terminal", tty: true, args: []string{"--json", "name,current"},
			want: "[\n  {\n    \"current\": true,\n    \"name\": \"dev\"\n  },\n  {\n    \"current\": false,\n    \"name\": \"prod\"\n  }\n]\n"},
		{name: "--jq", tty: true, args: []string{"--jq", ".[] | select(.current) | .server"}, want: "nats://127.0.0.1:4222\n"},
		{name: "--template", args: []string{"--template", `{{range .}}{{.name}}={{.gateway}};{{end}}`},
			want: "dev=;prod=gpuaas.example.com:22;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(tt.tty)
			f, _ := factoryWithContexts(t, ios)
			f.Flags = clientconfig.Overrides{Context: tt.context}
			t.Setenv(clientconfig.EnvContext, tt.envCtx)
			if err := cmdtest.Execute(NewCmdList(f, nil), tt.args...); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(out.String(), "secret") {
				t.Errorf("output %q shows a session token", out.String())
			}
		})
	}
}

func TestListAllJSONNeverShowsTokens(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(false)
	f, _ := factoryWithContexts(t, ios)
	if err := cmdtest.Execute(NewCmdList(f, nil), "--json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"token_expires_at":"2030-01-10T14:00:00Z"`) || strings.Contains(out.String(), "secret") {
		t.Fatalf("got %s; want every field but the token", out.String())
	}
}

func TestListEmpty(t *testing.T) {
	ios, _, out, errOut := cmdtest.Streams(true)
	f, cfg := factoryWithContexts(t, ios)
	cfg.Contexts = map[string]clientconfig.Context{}
	if err := cmdtest.Execute(NewCmdList(f, nil)); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), "No contexts") {
		t.Fatalf("got stdout %q stderr %q; want the note on stderr only", out.String(), errOut.String())
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(f, nil), "extra"), "unexpected argument")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(f, nil), "--json", "bogus"), "bogus")
}
