package cmdutil

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/internal/api"
)

// CompletionTimeout bounds what a shell completion may spend asking the
// server, connecting included: a shell waits for it at every Tab.
const CompletionTimeout = 2 * time.Second

// Candidate is a value a completion offers and the few words a shell
// shows beside it.
type Candidate struct {
	Value, Description string
}

// Lister fetches the values a completion offers.
type Lister func(ctx context.Context, c *api.Client) ([]Candidate, error)

// CompleteWith returns a cobra completion function offering what list
// returns, those starting with what was typed. It asks the server through
// f.Client within CompletionTimeout; when the server cannot be reached,
// refuses (no login, no role) or is slow, it offers nothing and prints
// nothing. maxArgs > 0 offers values only while fewer arguments than
// that were given (0 for a flag).
func CompleteWith(f *Factory, maxArgs int, list Lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if maxArgs > 0 && len(args) >= maxArgs {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, CompletionTimeout)
		defer cancel()
		found, err := fetchCandidates(ctx, f, list)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, c := range found {
			if c.Value == "" || !strings.HasPrefix(c.Value, toComplete) {
				continue
			}
			if desc := strings.Join(strings.Fields(c.Description), " "); desc != "" {
				out = append(out, cobra.CompletionWithDesc(c.Value, desc))
			} else {
				out = append(out, c.Value)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

type fetched struct {
	found []Candidate
	err   error
}

// fetchCandidates runs list on f's client, giving up when ctx ends: the
// dial has its own, longer timeout (clientconn.ConnectTimeout). What is left running
// ends with the process, which a completion is about to do.
func fetchCandidates(ctx context.Context, f *Factory, list Lister) ([]Candidate, error) {
	done := make(chan fetched, 1)
	go func() {
		client, err := f.Client()
		if err != nil {
			done <- fetched{err: err}
			return
		}
		found, err := list(ctx, client)
		done <- fetched{found, err}
	}()
	select {
	case r := <-done:
		return r.found, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// AllocationIDs lists the project's allocations as `gpuaas alloc list`
// shows them (released ones left out), described by state and SKU.
func AllocationIDs(ctx context.Context, c *api.Client) ([]Candidate, error) {
	resp, err := c.AllocList(ctx, api.AllocListRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, 0, len(resp.Allocations))
	for _, a := range resp.Allocations {
		out = append(out, Candidate{a.ID, a.State + " " + a.SKU})
	}
	return out, nil
}

// SKUs lists the catalog's SKUs.
func SKUs(ctx context.Context, c *api.Client) ([]Candidate, error) {
	resp, err := c.CatalogList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, 0, len(resp.SKUs))
	for _, s := range resp.SKUs {
		out = append(out, Candidate{s.ID, s.Description})
	}
	return out, nil
}

// ProjectNames lists the projects the user belongs to.
func ProjectNames(ctx context.Context, c *api.Client) ([]Candidate, error) {
	resp, err := c.ProjectList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, 0, len(resp.Projects))
	for _, p := range resp.Projects {
		out = append(out, Candidate{p.Name, p.Role})
	}
	return out, nil
}

// NodeNames lists the nodes by name (operators only: anyone else gets
// nothing).
func NodeNames(ctx context.Context, c *api.Client) ([]Candidate, error) {
	resp, err := c.NodeList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, 0, len(resp.Nodes))
	for _, n := range resp.Nodes {
		out = append(out, Candidate{n.Name, n.State + " " + n.GPUModel})
	}
	slices.SortFunc(out, func(a, b Candidate) int { return strings.Compare(a.Value, b.Value) })
	return out, nil
}

// SessionIDs lists the user's terminal sessions (ts-…), newest first.
func SessionIDs(ctx context.Context, c *api.Client) ([]Candidate, error) {
	resp, err := c.SessionList(ctx, api.SessionListRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, 0, len(resp.Sessions))
	for _, s := range resp.Sessions {
		out = append(out, Candidate{s.ID, s.Kind + " on " + s.AllocationID})
	}
	return out, nil
}
