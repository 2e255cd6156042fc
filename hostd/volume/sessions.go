package volume

import (
	"path/filepath"
	"slices"
)

// SessionDir is where hostd mounts volume id for an sftp session
// (hostd/term, docs/volumes.md "Data without a GPU"):
// <stateDir>/volume-sessions/<id>, under a directory only root can
// traverse.
func SessionDir(stateDir, id string) string {
	return filepath.Join(stateDir, "volume-sessions", id)
}

// InSession lists, sorted, the ids of infos mounted for a session of a
// hostd whose state directory is stateDir: the volume sessions the node
// holds now, which its health report gives controld so that a session
// whose gateway went away without a word is let go (docs/volumes.md,
// "When a gateway dies").
func InSession(stateDir string, infos []Info) []string {
	dirs := []string{filepath.Clean(SessionDir(stateDir, ""))}
	if abs, err := filepath.Abs(dirs[0]); err == nil {
		dirs = append(dirs, abs)
	}
	if real, err := filepath.EvalSymlinks(dirs[0]); err == nil {
		dirs = append(dirs, real)
	}
	ids := []string{}
	for _, i := range infos {
		if i.MountPoint == "" {
			continue
		}
		for _, d := range dirs {
			if filepath.Clean(i.MountPoint) == filepath.Join(d, i.ID) {
				ids = append(ids, i.ID)
				break
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
