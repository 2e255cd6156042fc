package cmdutil

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestFollowLogsReadsOnPastEmptyPagesWithMore: without follow, a page
// with no line ends the read only when controld says nothing more is
// stored (More false); an empty page with More (a long log skipped up to
// After, a bounded amount a call) is read on from its cursor, so `job logs
// --after N` prints the lines after N instead of nothing.
func TestFollowLogsReadsOnPastEmptyPagesWithMore(t *testing.T) {
	pages := []LogPage{
		{After: 10, Cursor: 3, More: true},
		{After: 10, Cursor: 6, More: true},
		{Lines: []api.LogLine{{Seq: 11, Text: "eleven"}, {Seq: 12, Text: "twelve"}}, After: 12, Cursor: 7},
		{After: 12, Cursor: 7},
	}
	var asked []LogRequest
	fetch := func(_ context.Context, req LogRequest) (LogPage, error) {
		asked = append(asked, req)
		if len(asked) > len(pages) {
			t.Fatalf("asked %d times; only %d pages", len(asked), len(pages))
		}
		return pages[len(asked)-1], nil
	}
	var got []string
	_, err := FollowLogs(context.Background(), fetch, LogRequest{After: 10}, false, func(l api.LogLine) error {
		got = append(got, l.Text)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "eleven" || got[1] != "twelve" {
		t.Fatalf("printed %q; want eleven and twelve", got)
	}
	if asked[1].Cursor != 3 || asked[2].Cursor != 6 {
		t.Errorf("requests %+v; want each from the previous page's cursor", asked)
	}
}
