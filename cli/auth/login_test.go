package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func TestNewCmdLogin(t *testing.T) {
	tests := []struct {
		name    string
		tty     bool
		args    []string
		want    LoginOptions
		wantErr string
	}{
		{name: "tty", tty: true, args: nil, want: LoginOptions{}},
		{name: "flags", tty: false, args: []string{"--email", "ada@example.com", "--password-stdin"},
			want: LoginOptions{Email: "ada@example.com", PasswordStdin: true}},
		{name: "piped without --password-stdin", tty: false, args: []string{"--email", "ada@example.com"},
			wantErr: "use --password-stdin"},
		{name: "web", tty: false, args: []string{"--web"}, want: LoginOptions{Web: true}},
		{name: "web with a password", tty: true, args: []string{"--web", "--password-stdin"},
			wantErr: "takes no --email or --password-stdin"},
		{name: "web with an email", tty: true, args: []string{"--web", "--email", "ada@example.com"},
			wantErr: "takes no --email or --password-stdin"},
		{name: "argument", tty: true, args: []string{"ada"}, wantErr: "unexpected argument"},
		{name: "invite", tty: true, args: []string{"--invite", " CODE1 "}, want: LoginOptions{Invite: "CODE1"}},
		{name: "invite piped", tty: false, args: []string{"--invite", "CODE1", "--password-stdin"},
			want: LoginOptions{Invite: "CODE1", PasswordStdin: true}},
		{name: "invite piped without --password-stdin", tty: false, args: []string{"--invite", "CODE1"}, wantErr: "use --password-stdin"},
		{name: "empty invite", tty: true, args: []string{"--invite", " "}, wantErr: "--invite needs the code"},
		{name: "invite with web", tty: true, args: []string{"--invite", "CODE1", "--web"}, wantErr: "does not go with --web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(tt.tty)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *LoginOptions
			cmd := NewCmdLogin(f, func(_ context.Context, o *LoginOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Email != tt.want.Email || got.PasswordStdin != tt.want.PasswordStdin || got.Web != tt.want.Web || got.Invite != tt.want.Invite {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestLoginCredentials(t *testing.T) {
	tests := []struct {
		name          string
		tty           bool
		email         string
		passwordStdin bool
		storedUser    string
		input         string
		wantEmail     string
		wantPassword  string
		wantErr       string
		wantPrompts   string
	}{
		{name: "prompts for both on a terminal", tty: true, input: "ada@example.com\nhunter2\n",
			wantEmail: "ada@example.com", wantPassword: "hunter2", wantPrompts: "Email: Password for ada@example.com on dev (nats://dev:4222): "},
		{name: "stored user is reused", tty: true, storedUser: "ada@example.com", input: "hunter2\n",
			wantEmail: "ada@example.com", wantPassword: "hunter2", wantPrompts: "Password for ada@example.com on dev (nats://dev:4222): "},
		{name: "--email wins", tty: true, email: "grace@example.com", storedUser: "ada@example.com", input: "pw\n",
			wantEmail: "grace@example.com", wantPassword: "pw", wantPrompts: "Password for grace@example.com on dev (nats://dev:4222): "},
		{name: "password from stdin, newline trimmed", email: "ada@example.com", passwordStdin: true, input: "s3cret word\r\n",
			wantEmail: "ada@example.com", wantPassword: "s3cret word"},
		{name: "password from stdin needs an email", passwordStdin: true, input: "pw\n", wantErr: "--email is required"},
		{name: "empty password", email: "ada@example.com", passwordStdin: true, input: "\n", wantErr: "empty password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := cmdtest.Streams(tt.tty)
			in.WriteString(tt.input)
			opts := &LoginOptions{IO: ios, Email: tt.email, PasswordStdin: tt.passwordStdin}
			active := clientconfig.Active{Name: "dev", Context: clientconfig.Context{Server: "nats://dev:4222", User: tt.storedUser}}
			ctx := context.Background()
			email, err := loginEmail(ctx, opts, active)
			var password string
			if err == nil {
				password, err = loginPassword(ctx, opts, passwordPrompt(email, active))
			}
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if email != tt.wantEmail || password != tt.wantPassword {
				t.Errorf("got %q/%q; want %q/%q", email, password, tt.wantEmail, tt.wantPassword)
			}
			if errOut.String() != tt.wantPrompts {
				t.Errorf("got prompts %q; want %q", errOut.String(), tt.wantPrompts)
			}
		})
	}
}

func TestStoreLogin(t *testing.T) {
	exp := now.Add(12 * time.Hour)
	resp := &api.LoginResponse{Token: "new-token", ExpiresAt: exp, User: api.User{ID: "u-9", Email: "ada@example.com"}}
	tests := []struct {
		name   string
		stored *clientconfig.Context
		active clientconfig.Active
		want   clientconfig.Context
	}{
		{"existing context keeps server and project",
			&clientconfig.Context{Server: "nats://dev:4222", Project: "dev", Token: "old"},
			clientconfig.Active{Name: "dev", Exists: true, Context: clientconfig.Context{Server: "nats://dev:4222"}},
			clientconfig.Context{Server: "nats://dev:4222", Project: "dev", User: "ada@example.com", UserID: "u-9", Token: "new-token", TokenExpiresAt: exp}},
		{"new context is created on the active server",
			nil,
			clientconfig.Active{Name: "dev", Context: clientconfig.Context{Server: "nats://env:4222"}},
			clientconfig.Context{Server: "nats://env:4222", User: "ada@example.com", UserID: "u-9", Token: "new-token", TokenExpiresAt: exp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			_, cfg := cmdtest.ConfigFactory(t, ios, tt.stored)
			storeLogin(cfg, tt.active, resp)
			got, _ := cfg.Context("dev")
			if got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
			if cfg.CurrentContext != "dev" {
				t.Errorf("got current context %q; want dev", cfg.CurrentContext)
			}
		})
	}
}

func TestLoginPasswordNeedsATerminalOrStdin(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	opts := &LoginOptions{IO: ios, Config: f.Config, Active: f.Active, Email: "ada@example.com",
		Client: func() (*api.Client, error) { return nil, nil }}
	err := loginRun(context.Background(), opts)
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "use --password-stdin") {
		t.Fatalf("got %v; want a usage error pointing at --password-stdin", err)
	}
}
