package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// TestHostileClientsCannotAimControld is the hostile-client suite: against
// gpuaas as an operator runs it (a nats-server process with controld's
// auth callout, a `gpuaas controld` process, Postgres), separate
// processes — a client that never logged in, one with a forged reply
// proof, and another user's session — send API requests whose reply
// subjects are every subject a confused deputy could be made to publish
// to. Nothing is delivered there (controld's own connection, which may
// read everything, watches), nothing is stored (the streams hold nothing
// on those subjects), nothing is executed (no project of theirs exists),
// each attacker is still answered on its own inbox, and the streams'
// limits read back from the server.
func TestHostileClientsCannotAimControld(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a deployment")
	}
	c := startFaultCluster(t, 1)
	hostile := filepath.Join(t.TempDir(), "hostile")
	if out, err := exec.Command("go", "build", "-o", hostile, "./testdata/hostile").CombinedOutput(); err != nil {
		t.Fatalf("build hostile: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	who, err := c.client().Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := who.User.ID
	// Another user, with a password of their own.
	invite := strings.TrimSpace(c.cli("admin", "user", "add", "mallory@example.com", "--json", "invite", "--jq", ".invite.code"))
	malloryDir := t.TempDir()
	mallory := []string{"GPUAAS_CONFIG_DIR=" + malloryDir}
	c.cliEnv(mallory, "", "context", "add", "faults", "--server", c.natsURL, "--use")
	c.cliEnv(mallory, "mallory's password\n", "login", "--invite", invite, "--password-stdin")

	keys, err := bus.LoadKeys(c.keys)
	if err != nil {
		t.Fatal(err)
	}
	observer, err := controlplane.ConnectControld(c.natsURL, bus.TLS{}, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	targets := []string{
		api.UserEventSubject(victim, "deputy"), api.UserInboxPrefix(victim) + ".deputy.1",
		hostproto.MsgTask.SubjectOf("n-deputy"), hostproto.MsgResult.SubjectOf("n-deputy"),
		gateproto.GateNoticeSubject, gateproto.GateRevokedSubject, api.EventSubject("deputy"),
		"$JS.API.STREAM.PURGE." + api.EventStreamName, "$JS.API.STREAM.DELETE." + recstore.Stream,
		"$JS.API.STREAM.PURGE." + recstore.Stream, "gpuaas.rec.deputy.meta", "gpuaas.rec.deputy.c.0",
		"$O." + api.RecordingsBucket + ".M.ZGVwdXR5", api.ControldInboxPrefix + ".deputy",
	}
	var mu sync.Mutex
	var seen []string
	for _, subj := range targets {
		if _, err := observer.NC.Subscribe(subj, func(m *nats.Msg) {
			mu.Lock()
			seen = append(seen, m.Subject)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := observer.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	controld := c.procs[len(c.nats)]
	refused := func() float64 {
		f := obstest.Scrape(t, controld.metrics)
		return f.Value("gpuaas_api_replies_refused_total", "reason", "not_an_inbox") +
			f.Value("gpuaas_api_replies_refused_total", "reason", "bad_proof") +
			f.Value("gpuaas_api_replies_refused_total", "reason", "not_callers_inbox")
	}
	before := refused()
	sent := 0
	for _, mode := range []string{"anon", "forged", "user:mallory@example.com:mallory's password"} {
		args := append([]string{c.natsURL, mode}, targets...)
		out, err := exec.CommandContext(ctx, hostile, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("hostile %s: %v\n%s", mode, err, out)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("hostile %s printed %q", mode, out)
		}
		sent += n
	}
	c.waitFor("controld to drop every hostile request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused()-before >= float64(sent) || len(seen) > 0
	})
	_ = observer.NC.Flush()
	mu.Lock()
	if len(seen) > 0 {
		t.Fatalf("controld published to subjects the attackers chose: %v", seen)
	}
	mu.Unlock()
	t.Logf("%d hostile requests dropped unanswered and unexecuted", sent)

	js, err := jetstream.New(observer.NC)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ stream, subjects string }{
		{api.EventStreamName, api.EventSubject("deputy")}, {recstore.Stream, "gpuaas.rec.deputy.>"},
	} {
		s, err := js.Stream(ctx, tt.stream)
		if err != nil {
			t.Fatalf("stream %s after the attack: %v", tt.stream, err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(tt.subjects))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.State.Subjects) > 0 {
			t.Errorf("stream %s holds %v after the attack", tt.stream, info.State.Subjects)
		}
		cfg := info.Config
		if cfg.MaxBytes <= 0 || cfg.MaxAge <= 0 {
			t.Errorf("stream %s: max bytes %d, max age %v; want both limited", tt.stream, cfg.MaxBytes, cfg.MaxAge)
		}
		if tt.stream == recstore.Stream && (!cfg.DenyDelete || !cfg.DenyPurge || !cfg.DiscardNewPerSubject) {
			t.Errorf("stream %s is not sealed: %+v", tt.stream, cfg)
		}
	}
	if events, err := js.Stream(ctx, api.EventStreamName); err == nil {
		if info, err := events.Info(ctx); err != nil || info.State.Msgs == 0 {
			t.Errorf("EVENTS after the attack: %v, %d messages; want the events of the set-up still there", err, info.State.Msgs)
		}
	}
	db, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var projects int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM projects WHERE name LIKE 'deputy%'`).Scan(&projects); err != nil || projects != 0 {
		t.Fatalf("%d projects created by hostile requests (%v); want none", projects, err)
	}
}
