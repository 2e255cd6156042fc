package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	clinode "github.com/gpuaas/gpuaas/cli/node"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// logsAgent runs an agent whose log ring (default size unless bounds are
// given) the test holds.
func logsAgent(t *testing.T, bounds ...int) (*runningAgent, *agent.LogRing, *api.Client, func() *api.Client) {
	t.Helper()
	env, admin := fleet(t, controld.HostsConfig{})
	ring := agent.NewLogRing(0, 0)
	if len(bounds) == 2 {
		ring = agent.NewLogRing(bounds[0], bounds[1])
	}
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "logs1"), newFakeHost().registry(), func(c *agent.Config) {
		c.LogRing = ring
		c.Log = slog.New(ring.Handler(c.Log.Handler()))
	})
	user := func() *api.Client {
		_, tok := env.AddUser(t, "plain@example.test", api.RoleUser)
		return env.Client(tok)
	}
	return a, ring, admin, user
}

func hasMsg(recs []api.LogRecord, msg string) *api.LogRecord {
	for i := range recs {
		if recs[i].Msg == msg {
			return &recs[i]
		}
	}
	return nil
}

// TestNodeLogs: an operator reads the agent's recent records through
// controld, with their attributes; since, after and limit filter them.
func TestNodeLogs(t *testing.T) {
	t.Parallel()
	a, ring, admin, _ := logsAgent(t)
	ctx := context.Background()
	// A record two hours old, as if the agent had logged it then.
	old := slog.NewRecord(time.Now().Add(-2*time.Hour), slog.LevelWarn, "old trouble", 0)
	old.AddAttrs(slog.String("corr", "c-old"))
	if err := ring.Handler(slog.DiscardHandler).Handle(ctx, old); err != nil {
		t.Fatal(err)
	}
	slog.New(ring.Handler(slog.DiscardHandler)).With("corr", "c-123").Info("probe line", "n", 7)

	resp, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "logs1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Node != a.NodeID() {
		t.Errorf("node got %q; want %q", resp.Node, a.NodeID())
	}
	serving := hasMsg(resp.Records, "hostd serving")
	if serving == nil || serving.Attrs["node"] != a.NodeID() || serving.Level != "INFO" {
		t.Fatalf("records %+v; want hostd serving with node=%s", resp.Records, a.NodeID())
	}
	probe := hasMsg(resp.Records, "probe line")
	if probe == nil || probe.Attrs["corr"] != "c-123" || probe.Attrs["n"] != "7" {
		t.Fatalf("probe line got %+v; want corr=c-123 n=7", probe)
	}
	if hasMsg(resp.Records, "old trouble") == nil {
		t.Errorf("without since, the old record is missing")
	}

	recent, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: a.NodeID(), Since: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	if hasMsg(recent.Records, "old trouble") != nil || hasMsg(recent.Records, "probe line") == nil {
		t.Errorf("since 10m got %+v; want probe line and not old trouble", recent.Records)
	}

	last := resp.Records[len(resp.Records)-1].Seq
	slog.New(ring.Handler(slog.DiscardHandler)).Info("after line")
	next, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "logs1", After: last})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range next.Records {
		if r.Seq <= last {
			t.Errorf("after %d got record %d", last, r.Seq)
		}
	}
	if hasMsg(next.Records, "after line") == nil {
		t.Errorf("after %d got %+v; want after line", last, next.Records)
	}

	one, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "logs1", Limit: 1})
	if err != nil || len(one.Records) != 1 {
		t.Fatalf("limit 1 got %+v, %v; want one record", one, err)
	}

	for _, bad := range []api.NodeLogsRequest{{Node: "logs1", Since: "ten minutes"}, {Node: "logs1", Since: "-5m"},
		{Node: "logs1", Limit: -1}, {Node: "logs1", Limit: api.MaxNodeLogsLimit + 1}} {
		if _, err := admin.NodeLogs(ctx, bad); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%+v got %v; want invalid_argument", bad, err)
		}
	}
	if _, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "no-such-node"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("an unknown node got %v; want not_found", err)
	}

	// A node whose hostd is not connected: unavailable, not a hang.
	a.stop()
	if _, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "logs1"}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("a stopped node got %v; want unavailable", err)
	}
}

// TestNodeLogsForbiddenToUsers: a user who is not an operator gets
// forbidden and no records.
func TestNodeLogsForbiddenToUsers(t *testing.T) {
	t.Parallel()
	a, _, _, user := logsAgent(t)
	resp, err := user().NodeLogs(context.Background(), api.NodeLogsRequest{Node: a.NodeID()})
	if !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("a user's node.logs got %v; want forbidden", err)
	}
	if len(resp.Records) != 0 {
		t.Errorf("a user got records %+v", resp.Records)
	}
}

// TestLogRingBounds: the ring keeps the newest records within its count
// and size bounds, with increasing seqs.
func TestLogRingBounds(t *testing.T) {
	t.Parallel()
	ring := agent.NewLogRing(10, 1<<20)
	log := slog.New(ring.Handler(slog.DiscardHandler))
	for i := range 25 {
		log.Info("line", "i", i)
	}
	recs := ring.Query(0, time.Time{}, 0)
	if len(recs) != 10 || recs[0].Attrs["i"] != "15" || recs[9].Attrs["i"] != "24" || recs[9].Seq-recs[0].Seq != 9 {
		t.Fatalf("got %d records from i=%v; want 10, i 15..24 with consecutive seqs", len(recs), recs[0].Attrs["i"])
	}
	// A restarted hostd's ring numbers its records after the old ones,
	// so -f goes on printing.
	later := agent.NewLogRing(0, 0)
	slog.New(later.Handler(slog.DiscardHandler)).Info("after restart")
	if got := later.Query(0, time.Time{}, 0); got[0].Seq <= recs[9].Seq {
		t.Errorf("a new ring's first seq %d is not after the old ring's last %d", got[0].Seq, recs[9].Seq)
	}
	small := agent.NewLogRing(1000, 2000)
	slog.New(small.Handler(slog.DiscardHandler)).Info("x", "pad", string(make([]byte, 500)))
	for range 20 {
		slog.New(small.Handler(slog.DiscardHandler)).Info("y", "pad", string(make([]byte, 500)))
	}
	if n := len(small.Query(0, time.Time{}, 0)); n == 0 || n > 4 {
		t.Errorf("a 2000-byte ring holds %d 500-byte records; want 1..4", n)
	}
}

// TestNodeLogsCLI: `gpuaas node logs NODE` against the real controld and
// agent prints the agent's records, one line each, and --json one object
// per line; -f prints records logged after it started.
func TestNodeLogsCLI(t *testing.T) {
	t.Parallel()
	a, ring, admin, _ := logsAgent(t)
	slog.New(ring.Handler(slog.DiscardHandler)).With("corr", "c-cli").Warn("disk slow", "dev", "nvme0")

	ios, _, out, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { return admin, nil }
	if err := cmdtest.Execute(clinode.NewCmdLogs(f, nil), "logs1", "--since", "10m"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), " INFO  hostd serving name=logs1 node="+a.NodeID()+"\n") ||
		!strings.Contains(out.String(), " WARN  disk slow corr=c-cli dev=nvme0\n") {
		t.Fatalf("node logs printed:\n%s\nwant the hostd serving and disk slow lines", out)
	}

	out.Reset()
	if err := cmdtest.Execute(clinode.NewCmdLogs(f, nil), "logs1", "--json"); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r api.LogRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		found = found || r.Msg == "disk slow" && r.Attrs["corr"] == "c-cli" && r.Level == "WARN"
	}
	if !found {
		t.Fatalf("--json printed:\n%s\nwant the disk slow record", out)
	}

	// Follow: a record logged while following is printed.
	ios, _, _, _ = cmdtest.Streams(false)
	fw := &syncBuffer{}
	ios.Out = fw
	f = cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { return admin, nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := clinode.NewCmdLogs(f, nil) // polls every DefaultLogsPollInterval
	cmd.SetContext(ctx)
	done := make(chan error, 1)
	go func() { done <- cmdtest.Execute(cmd, "logs1", "-f", "--limit", "1", "--json") }()
	testutil.Eventually(t, "the newest record printed", func() bool { return fw.String() != "" })
	slog.New(ring.Handler(slog.DiscardHandler)).Info("later line", "k", "v")
	testutil.Eventually(t, "the followed record printed", func() bool { return strings.Contains(fw.String(), `"msg":"later line"`) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("follow ended with %v; want canceled", err)
	}
	var seq uint64
	for _, line := range strings.Split(strings.TrimSpace(fw.String()), "\n") {
		var r api.LogRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Seq <= seq {
			t.Errorf("follow printed %q after seq %d (%v); want each record once, in order", line, seq, err)
		}
		seq = r.Seq
	}
}

// TestNodeLogsLargerThanOneMessage: a ring holding more than one NATS
// message can carry (5,000 records of 2 KiB, over the bus's 8 MiB) is
// still read: the newest records that fit; following with after pages
// through the rest in order. Before, the reply was too large to send and
// node.logs timed out.
func TestNodeLogsLargerThanOneMessage(t *testing.T) {
	t.Parallel()
	a, ring, admin, _ := logsAgent(t, 6000, 16<<20)
	readyNode(t, admin, a.NodeID()) // its start-up tasks logged
	ctx := context.Background()
	log := slog.New(ring.Handler(slog.DiscardHandler))
	pad := strings.Repeat("x", 2048)
	for i := range 5000 {
		log.Info("bulk", "i", i, "pad", pad)
	}
	resp, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "logs1"})
	if err != nil {
		t.Fatal(err)
	}
	// The agent's own lines (a heartbeat, say) may come after the bulk:
	// the newest bulk record kept must be the last one logged.
	n, lastBulk := len(resp.Records), ""
	for _, r := range resp.Records {
		if r.Msg == "bulk" {
			lastBulk = r.Attrs["i"]
		}
	}
	if n == 0 || n >= 5000 || lastBulk != "4999" {
		t.Fatalf("got %d records, the newest bulk one i=%q; want the newest that fit, with i=4999 among them", n, lastBulk)
	}
	// Following from the oldest record kept: pages, in order, to the end.
	all := ring.Query(0, time.Time{}, 0)
	after, last, pages := all[0].Seq, all[len(all)-1].Seq, 0
	for after < last {
		page, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: "logs1", After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) == 0 {
			t.Fatalf("after %d: no records; want up to %d", after, last)
		}
		for _, r := range page.Records {
			if r.Seq <= after {
				t.Fatalf("after %d got seq %d", after, r.Seq)
			}
			after = r.Seq
		}
		pages++
	}
	if pages < 2 {
		t.Errorf("%d records in %d page; want several pages", len(all), pages)
	}
}
