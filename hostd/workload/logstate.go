package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/internal/logstream"
)

// LogState is what hostd keeps of a workload's log on disk, written after
// each acknowledged batch: what a restarted hostd needs to go on reading
// the container's log where it stopped
// (docs/decisions/0026-workload-logs-across-restarts.md).
type LogState struct {
	WorkloadID   string `json:"workload_id"`
	AllocationID string `json:"allocation_id"`
	PosixUser    string `json:"posix_user"`
	MaxBytes     int64  `json:"max_bytes,omitempty"`
	// Checkpoint is the last resume point (nil: nothing published yet).
	Checkpoint *logstream.Checkpoint `json:"checkpoint,omitempty"`
	// Done says the container ended and its last lines and markers were
	// published: nothing is followed again.
	Done bool `json:"done,omitempty"`
}

// LogStates keeps each workload's LogState in a directory of hostd's own.
type LogStates struct{ Dir string }

func (s LogStates) path(id string) string { return filepath.Join(s.Dir, id+".json") }

// Load reads workload id's state; found is false when there is none.
func (s LogStates) Load(id string) (st LogState, found bool, err error) {
	if err := CheckID(id); err != nil {
		return st, false, err
	}
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("log state %s: %w", id, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("log state %s: %w", id, err)
	}
	return st, true, nil
}

// Save writes st in place of the last (a new file renamed over it).
func (s LogStates) Save(st LogState) error {
	if err := CheckID(st.WorkloadID); err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("log state: %w", err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := s.path(st.WorkloadID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("log state %s: %w", st.WorkloadID, err)
	}
	if err := os.Rename(tmp, s.path(st.WorkloadID)); err != nil {
		return fmt.Errorf("log state %s: %w", st.WorkloadID, err)
	}
	return nil
}

// Remove forgets workload id's state.
func (s LogStates) Remove(id string) error {
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("log state %s: %w", id, err)
	}
	return nil
}

// Unfinished lists the states of workloads whose logs are not done.
func (s LogStates) Unfinished() ([]LogState, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log states: %w", err)
	}
	var out []LogState
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || CheckID(id) != nil {
			continue
		}
		st, found, err := s.Load(id)
		if err != nil || !found || st.Done {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// Wait waits until the container named name is not running (podman wait)
// or ctx ends.
func (p Podman) Wait(ctx context.Context, name string) error {
	r, err := p.Run(ctx, nil, "wait", name)
	if err != nil {
		return err
	}
	return r.Err("wait " + name)
}
