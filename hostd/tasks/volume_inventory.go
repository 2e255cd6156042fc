package tasks

import "context"

// volumeIDs lists the volumes the node holds, for the health report:
// controld fails a volume the node should hold and does not (a node back
// without its data disk; controld/volumes.CheckInventory). nil when the
// node keeps no volumes or could not list them: an absent list proves
// nothing, an empty one says the node holds none.
func volumeIDs(env *Env) *[]string {
	if env.Volumes == nil {
		return nil
	}
	infos, err := env.Volumes.List(context.Background())
	if err != nil {
		if env.Log != nil {
			env.Log.Warn("volumes unlisted", "err", err)
		}
		return nil
	}
	ids := make([]string, 0, len(infos))
	for _, i := range infos {
		ids = append(ids, i.ID)
	}
	return &ids
}
