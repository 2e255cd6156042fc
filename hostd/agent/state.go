package agent

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/fsutil"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// identity is what enrollment gave this node, kept in the state directory
// (0600): its key, its id, and the task keys it trusts.
type identity struct {
	NodeID            string        `json:"node_id"`
	Name              string        `json:"name"`
	Shape             string        `json:"shape"`
	Seed              []byte        `json:"seed"` // Ed25519 private key seed
	TaskKeys          [][]byte      `json:"task_keys"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
}

func (id *identity) key() ed25519.PrivateKey { return ed25519.NewKeyFromSeed(id.Seed) }

const identityFile = "identity.json"

// record is what hostd remembers of a task: the persisted seen-set (a task
// id is run at most once) and the outbox of results not yet acknowledged.
type record struct {
	ID         string                   `json:"id"`
	Type       string                   `json:"type"`
	Corr       string                   `json:"corr,omitempty"` // the task's correlation id, for log lines
	State      string                   `json:"state"`          // accepted, running, done
	Phase      string                   `json:"phase,omitempty"`
	Phases     []hostproto.TaskProgress `json:"phases,omitempty"`
	AcceptedAt time.Time                `json:"accepted_at"`
	Result     *hostproto.TaskResult    `json:"result,omitempty"`
	Acked      bool                     `json:"acked,omitempty"`
	// lazy: the record is kept in memory only until controld acknowledged
	// its result, then written once, not durably (a read-only task type:
	// readOnlyTask; docs/decisions/0043-task-path.md).
	lazy bool
}

// Record states.
const (
	stateAccepted = "accepted"
	stateRunning  = "running"
	stateDone     = "done"
)

// writeFileAtomic writes a state file; durable for the writes whose loss
// after a power cut would matter.
func writeFileAtomic(path string, data []byte, perm os.FileMode, durable bool) error {
	d := fsutil.Atomic
	if durable {
		d = fsutil.Durable
	}
	return fsutil.WriteFile(path, data, perm, d)
}

func loadIdentity(dir string) (*identity, error) {
	b, err := os.ReadFile(filepath.Join(dir, identityFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read identity: %w", err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil || len(id.Seed) != ed25519.SeedSize || id.NodeID == "" {
		return nil, fmt.Errorf("identity in %s is corrupt; re-enroll with a new token after removing it", dir)
	}
	return &id, nil
}

func saveIdentity(dir string, id *identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, identityFile), b, 0o600, true)
}

func tasksDir(stateDir string) string { return filepath.Join(stateDir, "tasks") }

// saveRecord writes a task record; durable for the writes whose loss
// would matter after a power cut (the seen-set entry, the result).
func saveRecord(stateDir string, r *record, durable bool) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(tasksDir(stateDir), r.ID+".json"), b, 0o600, durable); err != nil {
		return fmt.Errorf("persist task %s: %w", r.ID, err)
	}
	return nil
}

// loadRecords reads every task record, dropping acknowledged ones older
// than keep: by then any envelope naming them has long expired, so they
// can no longer be replayed.
func loadRecords(stateDir string, now time.Time, keep time.Duration) (map[string]*record, error) {
	dir := tasksDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*record{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
			return nil, fmt.Errorf("task record %s is corrupt", path)
		}
		if r.Acked && now.Sub(r.AcceptedAt) > keep {
			_ = os.Remove(path)
			continue
		}
		out[r.ID] = &r
	}
	return out, nil
}
