package tasks

import (
	"context"
	"errors"
	"strings"
)

// errNotShared is a volume mount root left private: copies of the
// volumes under it are holders until their namespace ends.
var errNotShared = errors.New("mount root left private")

// volumeMountRoot is the mount whose propagation a volume mounted at
// path (api.CheckMountPath's) inherits: Env.VolumeRoot, else the path's
// top directory (/data, /mnt, ...).
func volumeMountRoot(env *Env, path string) string {
	if env.VolumeRoot != "" {
		return env.VolumeRoot
	}
	top, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return "/" + top
}

// shareVolumeRoot makes the mount root of a volume mounted at path
// shared before the volume is mounted there; a root that cannot be is
// logged, and the volume mounted all the same (its copies then count as
// holders before the umount: a busy detach, never a false one).
func shareVolumeRoot(env *Env, path string) {
	root := volumeMountRoot(env, path)
	if err := shareMountRoot(root); err != nil {
		env.Log.Warn("volume mount root not shared: copies of its volumes in other namespaces hold them until those end",
			"root", root, "err", err)
	}
}

// ShareVolumeRoots makes the node's volume mount roots shared at hostd's
// start (docs/decisions/0066-volume-mount-propagation.md): Env.VolumeRoot,
// else the top directories of the volumes mounted now. Attaching a volume
// does it for its own root too.
func ShareVolumeRoots(ctx context.Context, env *Env) {
	if env.Volumes == nil {
		return
	}
	if env.VolumeRoot != "" {
		shareVolumeRoot(env, "/")
		return
	}
	vs, err := env.Volumes.List(ctx)
	if err != nil {
		env.Log.Warn("volume mount roots not shared", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, v := range vs {
		if v.MountPoint == "" || seen[volumeMountRoot(env, v.MountPoint)] {
			continue
		}
		seen[volumeMountRoot(env, v.MountPoint)] = true
		shareVolumeRoot(env, v.MountPoint)
	}
}

// ReleaseVolumeRoots undoes, when hostd stops, the binds ShareVolumeRoots
// and attaches made of volume mount roots with nothing mounted under them
// (docs/decisions/0066-volume-mount-propagation.md): a node, or a `gpuaas
// dev` run, leaves no mount behind it; a root with a volume mounted stays.
func ReleaseVolumeRoots(env *Env) {
	for _, root := range boundRootList() {
		if err := unshareMountRoot(root); err != nil {
			env.Log.Warn("volume mount root left bound", "root", root, "err", err)
		}
	}
}
