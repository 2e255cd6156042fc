package tasks

import (
	"context"

	"github.com/gpuaas/gpuaas/hostd/volume"
)

// volumeInventory lists, for the health report, the volumes the node
// holds and those of them mounted for an sftp session now. controld fails
// a volume the node should hold and does not (a node back without its
// data disk; controld/volumes.CheckInventory), and lets go of a session
// hold the node no longer has (a gateway that died mid-session;
// controld/volumes.EndLostSessions). Both nil when the node keeps no
// volumes or could not list them: an absent list proves nothing, an
// empty one says the node holds none.
func volumeInventory(env *Env) (ids, sessions *[]string) {
	if env.Volumes == nil {
		return nil, nil
	}
	infos, err := env.Volumes.List(context.Background())
	if err != nil {
		if env.Log != nil {
			env.Log.Warn("volumes unlisted", "err", err)
		}
		return nil, nil
	}
	all := make([]string, 0, len(infos))
	for _, i := range infos {
		all = append(all, i.ID)
	}
	open := volume.InSession(env.StateDir, infos)
	return &all, &open
}
