package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdArgs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	tests := []struct {
		name    string
		cmd     *cobra.Command
		args    []string
		wantErr string // "" means it reaches the server
	}{
		{"list", NewCmdList(f, nil), nil, ""},
		{"list pending", NewCmdList(f, nil), []string{"--state", "pending", "--limit", "5"}, ""},
		{"list unknown state", NewCmdList(f, nil), []string{"--state", "lost"}, "--state must be one of dead, pending, published, dropped"},
		{"list no limit", NewCmdList(f, nil), []string{"--limit", "0"}, "--limit must be between 1 and 1000"},
		{"list with an argument", NewCmdList(f, nil), []string{"7"}, "unexpected argument"},
		{"retry", NewCmdRetry(f, nil), []string{"7"}, ""},
		{"retry without an id", NewCmdRetry(f, nil), nil, "requires an outbox event id"},
		{"retry not a number", NewCmdRetry(f, nil), []string{"abc"}, `an outbox event id is a positive number, got "abc"`},
		{"retry zero", NewCmdRetry(f, nil), []string{"0"}, "positive number"},
		{"drop piped with --yes", NewCmdDrop(f, nil), []string{"7", "--yes"}, ""},
		{"drop piped without --yes", NewCmdDrop(f, nil), []string{"7"}, "pass --yes to confirm"},
		{"drop two", NewCmdDrop(f, nil), []string{"7", "8", "--yes"}, "too many arguments"},
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

func TestNewCmdListFlags(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *ListOptions
	if err := cmdtest.Execute(NewCmdList(cmdtest.Factory(ios), func(_ context.Context, o *ListOptions) error { got = o; return nil }),
		"--state", "published", "-L", "3", "--json", "id,kind"); err != nil {
		t.Fatal(err)
	}
	if got.State != "published" || got.Limit != 3 || got.Exporter == nil {
		t.Errorf("got %+v; want published, 3, an exporter", *got)
	}
}

func TestDropConfirms(t *testing.T) {
	ios, in, _, _ := cmdtest.Streams(true)
	ios.SetStdinTTY(true)
	ios.SetStderrTTY(true)
	in.WriteString("n\n")
	called := false
	opts := &DropOptions{IO: ios, ID: 7, Now: time.Now,
		Client: func() (*api.Client, error) { called = true; return nil, cmdtest.ErrReachedServer }}
	if err := dropRun(context.Background(), opts); !errors.Is(err, cmdutil.ErrCancelled) || called {
		t.Fatalf("answered no: got %v, reached the server %v; want cancelled, not reached", err, called)
	}
	in.WriteString("y\n")
	if err := dropRun(context.Background(), opts); !errors.Is(err, cmdtest.ErrReachedServer) {
		t.Fatalf("answered yes: got %v; want it to reach the server", err)
	}
}

// deadEvent inserts an outbox row the relay gave up on.
func deadEvent(t *testing.T, env *controldtest.Env, kind string) int64 {
	t.Helper()
	var id int64
	if err := env.Server.Pool().QueryRow(t.Context(), `INSERT INTO outbox_events (kind, subject, created_at, state, attempts, last_error)
		VALUES ($1, 's-1', now(), 'dead', 20, 'no ack from JetStream') RETURNING id`, kind).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestOutboxCommands drives the three verbs against a real controld.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	_, userToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	first, second := deadEvent(t, env, "test.first"), deadEvent(t, env, "test.second")
	run := func(token string, cmd func(*cmdutil.Factory) *cobra.Command, args ...string) (string, error) {
		t.Helper()
		ios, _, out, _ := cmdtest.Streams(false)
		f := &cmdutil.Factory{IOStreams: ios, Now: time.Now,
			Client: func() (*api.Client, error) { return env.Client(token), nil }}
		err := cmdtest.Execute(cmd(f), args...)
		return out.String(), err
	}
	list := func(f *cmdutil.Factory) *cobra.Command { return NewCmdList(f, nil) }
	retry := func(f *cmdutil.Factory) *cobra.Command { return NewCmdRetry(f, nil) }
	drop := func(f *cmdutil.Factory) *cobra.Command { return NewCmdDrop(f, nil) }

	out, err := run(env.AdminToken, list)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("%d\ttest.first\ts-1\tdead\t20\t", first), fmt.Sprintf("%d\ttest.second\ts-1\tdead\t20\t", second)} {
		if !strings.Contains(out, want) {
			t.Errorf("list: got %q; want a line starting %q", out, want)
		}
	}
	if out, err = run(env.AdminToken, list, "--json", "id,state,last_error"); err != nil {
		t.Fatal(err)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 2 || listed[0]["last_error"] != "no ack from JetStream" {
		t.Fatalf("list --json: got %s (%v); want two events with their last error", out, err)
	}

	if _, err := run(userToken, list); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("list as a user: got %v; want forbidden", err)
	}
	if _, err := run(userToken, retry, fmt.Sprint(first)); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("retry as a user: got %v; want forbidden", err)
	}
	if _, err := run(env.AdminToken, drop, "999999", "--yes"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("drop of an unknown id: got %v; want not_found", err)
	}

	if out, err = run(env.AdminToken, retry, fmt.Sprint(first), "--jq", ".state"); err != nil || out != "pending\n" {
		t.Fatalf("retry: got %q, %v; want pending", out, err)
	}
	if out, err = run(env.AdminToken, drop, fmt.Sprint(second), "--yes"); err != nil || !strings.Contains(out, "\tdropped\t") {
		t.Fatalf("drop: got %q, %v; want the dropped event", out, err)
	}
	if out, err = run(env.AdminToken, list); err != nil || out != "" {
		t.Fatalf("list after: got %q, %v; want no dead events", out, err)
	}
	if out, err = run(env.AdminToken, list, "--state", "dropped", "--jq", ".[].id"); err != nil || out != fmt.Sprintf("%d\n", second) {
		t.Fatalf("list --state dropped: got %q, %v; want %d", out, err, second)
	}
	if _, err := run(env.AdminToken, retry, fmt.Sprint(second)); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "is dropped, not dead") {
		t.Fatalf("retry of a dropped event: got %v; want conflict saying it is dropped", err)
	}
}
