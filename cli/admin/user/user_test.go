package user

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdAdd(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    AddOptions
		wantErr string
	}{
		{name: "defaults", args: []string{"ada@example.com"}, want: AddOptions{Email: "ada@example.com", Role: api.RoleUser}},
		{name: "all flags", args: []string{" ops@example.com ", "--role", "operator", "--name", "Op S"},
			want: AddOptions{Email: "ops@example.com", Role: api.RoleOperator, Name: "Op S"}},
		{name: "no email", args: nil, wantErr: "requires an email address"},
		{name: "unknown role", args: []string{"ada@example.com", "--role", "gateway"}, wantErr: "--role must be user, operator or admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *AddOptions
			err := cmdtest.Execute(NewCmdAdd(cmdtest.Factory(ios), func(_ context.Context, o *AddOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Email != tt.want.Email || got.Role != tt.want.Role || got.Name != tt.want.Name {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestNewCmdArgs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	tests := []struct {
		name    string
		cmd     *cobra.Command
		args    []string
		wantErr string // "" means it reaches the server
	}{
		{"invite", NewCmdInvite(f, nil), []string{"ada@example.com"}, ""},
		{"invite without a user", NewCmdInvite(f, nil), nil, "requires a user"},
		{"disable piped", NewCmdDisable(f, nil), []string{"u-1"}, ""},
		{"disable two users", NewCmdDisable(f, nil), []string{"u-1", "u-2"}, "too many arguments"},
		{"enable", NewCmdEnable(f, nil), []string{"u-1"}, ""},
		{"list", NewCmdList(f, nil), nil, ""},
		{"list with an argument", NewCmdList(f, nil), []string{"x"}, "unexpected argument"},
		{"link", NewCmdLink(f, nil), []string{"ada@example.com", "--issuer", "https://idp", "--subject", "s"}, ""},
		{"link without a subject", NewCmdLink(f, nil), []string{"ada@example.com", "--issuer", "https://idp"}, "--issuer and --subject are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cmdtest.Execute(tt.cmd, tt.args...)
			if tt.wantErr == "" {
				if !errors.Is(err, cmdtest.ErrReachedServer) {
					t.Fatalf("got %v; want it to reach the server", err)
				}
				return
			}
			cmdtest.WantUsageError(t, err, tt.wantErr)
		})
	}
}

func TestDisableConfirmation(t *testing.T) {
	tests := []struct {
		name       string
		tty, yes   bool
		input      string
		wantErr    error
		wantPrompt string
	}{
		{"tty declined", true, false, "n\n", cmdutil.ErrCancelled, "Disable bob@example.com and end all their sessions? [y/N] "},
		{"tty confirmed", true, false, "yes\n", cmdtest.ErrReachedServer, "Disable bob@example.com and end all their sessions? [y/N] "},
		{"tty --yes", true, true, "", cmdtest.ErrReachedServer, ""},
		{"piped never prompts", false, false, "", cmdtest.ErrReachedServer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := cmdtest.Streams(tt.tty)
			in.WriteString(tt.input)
			opts := &DisableOptions{IO: ios, User: "bob@example.com", Yes: tt.yes,
				Client: func() (*api.Client, error) { return nil, cmdtest.ErrReachedServer }}
			if err := disableRun(context.Background(), opts); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v; want %v", err, tt.wantErr)
			}
			if errOut.String() != tt.wantPrompt {
				t.Errorf("got stderr %q; want %q", errOut.String(), tt.wantPrompt)
			}
		})
	}
}

func TestPrintUsers(t *testing.T) {
	now := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	last := now.Add(-3 * time.Hour)
	users := []api.AdminUser{
		{ID: "u-1", Email: "admin@example.com", Role: api.RoleAdmin, Provider: "local", State: api.UserActive,
			CreatedAt: now.Add(-48 * time.Hour), LastLoginAt: &last},
		{ID: "u-2", Email: "ada@example.com", Role: api.RoleUser, Provider: "local", State: api.UserInvited, CreatedAt: now.Add(-time.Hour)},
	}
	tests := []struct {
		name string
		tty  bool
		want string
	}{
		{"terminal", true, "EMAIL              ROLE   PROVIDER  STATE    CREATED  LAST LOGIN  ID\n" +
			"admin@example.com  admin  local     active   2d ago   3h ago      u-1\n" +
			"ada@example.com    user   local     invited  1h ago               u-2\n"},
		{"piped", false, "admin@example.com\tadmin\tlocal\tactive\t2030-01-08T12:00:00Z\t2030-01-10T09:00:00Z\tu-1\n" +
			"ada@example.com\tuser\tlocal\tinvited\t2030-01-10T11:00:00Z\t\tu-2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(tt.tty)
			if err := printUsers(ios, now, users); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got\n%q\nwant\n%q", out.String(), tt.want)
			}
		})
	}
}

// TestAgainstControld runs the verbs against a real controld, as an admin.
func TestAgainstControld(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	run := func(cmd func(*cmdutil.Factory) *cobra.Command, args ...string) (string, error) {
		ios, _, out, _ := cmdtest.Streams(false)
		f := &cmdutil.Factory{IOStreams: ios, Now: time.Now,
			Client: func() (*api.Client, error) { return env.Client(env.AdminToken), nil }}
		c := cmd(f)
		c.SetContext(ctx)
		err := cmdtest.Execute(c, args...)
		return out.String(), err
	}
	out, err := run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdAdd(f, nil) }, "ada@example.com", "--role", "operator")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSuffix(out, "\n"), "\t")
	if len(fields) != 4 || fields[0] != "ada@example.com" || fields[2] == "" {
		t.Fatalf("add printed %q; want email, id, code and expiry", out)
	}
	code := fields[2]
	if _, err := env.AnonClient().Login(ctx, api.LoginRequest{Invite: code, Password: "ada's password"}); err != nil {
		t.Fatalf("the printed code does not redeem: %v", err)
	}

	out, err = run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdList(f, nil) }, "--json", "email,state,role")
	if err != nil {
		t.Fatal(err)
	}
	var list []api.AdminUser
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list --json printed %q: %v", out, err)
	}
	if len(list) != 2 || list[1].Email != "ada@example.com" || list[1].State != api.UserActive || list[1].Role != api.RoleOperator {
		t.Fatalf("list got %+v; want the admin and ada, an active operator", list)
	}

	if out, err = run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdDisable(f, nil) }, "ada@example.com"); err != nil ||
		!strings.HasPrefix(out, "ada@example.com\t") || !strings.Contains(out, "\tdisabled\ts-") {
		t.Fatalf("disable printed %q, %v; want ada disabled with her session", out, err)
	}
	if _, err = run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdDisable(f, nil) }, controldtest.AdminEmail); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("disable yourself: got %v; want invalid_argument", err)
	}
	if out, err = run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdEnable(f, nil) }, "ada@example.com"); err != nil || !strings.Contains(out, "\tactive") {
		t.Fatalf("enable printed %q, %v", out, err)
	}
	if out, err = run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdInvite(f, nil) }, "ada@example.com", "--jq", ".invite.code"); err != nil || len(strings.TrimSpace(out)) < 20 {
		t.Fatalf("invite --jq .invite.code printed %q, %v; want a code", out, err)
	}
	if out, err = run(func(f *cmdutil.Factory) *cobra.Command { return NewCmdLink(f, nil) },
		"ada@example.com", "--issuer", "https://idp.example.com", "--subject", "ada-1"); err != nil || !strings.Contains(out, "\thttps://idp.example.com\tada-1") {
		t.Fatalf("link printed %q, %v", out, err)
	}
}
