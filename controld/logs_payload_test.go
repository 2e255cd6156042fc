package controld_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// TestLogPagesFitOneMessage reads a log of long lines whose JSON is
// several times the NATS server's max_payload (1 MiB by default in a
// stock nats-server, 8 MiB in dev's and the tests'): each page is cut by bytes before it would
// pass the limit, its cursor resuming inside the batch it stopped in, and
// the whole log comes back once, in order — with the default page of
// 1,000 lines a reply used to exceed the limit and the call timed out.
func TestLogPagesFitOneMessage(t *testing.T) {
	t.Parallel()
	env, admin, w := tinyWorkload(t)
	ctx := t.Context()
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	pump, err := logstream.NewPump(logstream.PumpConfig{Publisher: js, ID: w.ID,
		Subject: logstream.Subject(w.NodeID, logstream.KindWorkload, w.ID)})
	if err != nil {
		t.Fatal(err)
	}
	// Lines of HTML, each byte of which encoding/json writes as six: 1,000
	// lines (the default page) of 4,000 bytes are ~24 MB in a reply.
	const n = 1000
	text := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("<", 3996) }
	for i := 1; i <= n; i++ {
		fmt.Fprintln(pump.Stdout(), text(i))
	}
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pump.Close(closeCtx)
	if closeCtx.Err() != nil {
		t.Fatal("the pump did not publish the lines within a minute")
	}
	maxPayload := env.NC.MaxPayload()
	if maxPayload > 12<<20 {
		t.Fatalf("the test's NATS server allows %d bytes a message; the log's ~24 MB must need several", maxPayload)
	}
	// A page is up to max_payload of JSON: under -race on a loaded
	// machine it can take longer than the client's default attempt
	// (retried, it only adds load). What is tested is the size.
	slow := admin.With(api.WithAttemptTimeout(time.Minute), api.WithTimeout(3*time.Minute))
	var lines []api.LogLine
	after, cursor, pages := int64(0), uint64(0), 0
	for len(lines) < n && pages < 2*n {
		p, err := slow.AppLogs(ctx, api.AppLogsRequest{ID: w.ID, After: after, Cursor: cursor})
		if err != nil {
			t.Fatalf("app.logs after line %d (page %d): %v", after, pages+1, err)
		}
		pages++
		if len(p.Lines) == 0 {
			t.Fatalf("page %d after line %d: empty, more %v", pages, after, p.More)
		}
		lines = append(lines, p.Lines...)
		after, cursor = p.After, p.Cursor
	}
	if want := int(int64(n*6*4000) / maxPayload); pages < want {
		t.Errorf("%d pages for ~24 MB of replies; want at least %d under %d bytes each", pages, want, maxPayload)
	}
	if len(lines) != n {
		t.Fatalf("got %d lines; want %d", len(lines), n)
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) || l.Text != text(i+1) {
			t.Fatalf("line %d: seq %d %.8q; want line %d", i+1, l.Seq, l.Text, i+1)
		}
	}
}
