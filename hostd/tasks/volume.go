package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Phases of the volume tasks.
const (
	PhaseVolumeCreate = "volume_create"
	PhaseVolumeResize = "volume_resize"
	PhaseVolumeDelete = "volume_delete"
)

// ErrNoVolumes is a volume task on a node that keeps no volumes
// (Env.Volumes is nil: hostd without root, say).
var ErrNoVolumes = errors.New("this node keeps no volumes")

// volumeStore is env's volume store, or ErrNoVolumes.
func volumeStore(env *Env, p hostproto.VolumeTaskParams) (volume.Store, error) {
	if err := volume.CheckID(p.VolumeID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	if env.Volumes == nil {
		return nil, ErrNoVolumes
	}
	return env.Volumes, nil
}

// volumeResult is what a volume task reports: the volume's sizes and the
// room left for volumes on the node.
func volumeResult(ctx context.Context, s volume.Store, info volume.Info) (hostproto.VolumeTaskResult, error) {
	free, err := s.Free(ctx)
	return hostproto.VolumeTaskResult{VolumeID: info.ID, SizeBytes: info.Size, FSSize: info.FSSize, FreeBytes: free}, err
}

// volumeCreate makes a volume (volume.Store.Create: a retried task finds
// it made). A failure removes what was made.
func volumeCreate(ctx context.Context, env *Env, p hostproto.VolumeTaskParams, rep Reporter) (any, error) {
	s, err := volumeStore(env, p)
	if err != nil {
		return nil, err
	}
	if err := volume.CheckSize(p.SizeBytes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	var info volume.Info
	err = NewPhased(env, rep).Run(ctx, PhaseVolumeCreate, func(ctx context.Context) error {
		info, err = s.Create(ctx, p.VolumeID, p.SizeBytes)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return volumeResult(ctx, s, info)
}

// volumeResize grows a volume, mounted or not.
func volumeResize(ctx context.Context, env *Env, p hostproto.VolumeTaskParams, rep Reporter) (any, error) {
	s, err := volumeStore(env, p)
	if err != nil {
		return nil, err
	}
	if err := volume.CheckSize(p.SizeBytes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	var info volume.Info
	err = NewPhased(env, rep).Run(ctx, PhaseVolumeResize, func(ctx context.Context) error {
		info, err = s.Grow(ctx, p.VolumeID, p.SizeBytes)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return volumeResult(ctx, s, info)
}

// volumeDelete removes a volume and its data; one that is not there is
// not an error (a retry). A mounted one is refused: controld removes
// only volumes no allocation has.
func volumeDelete(ctx context.Context, env *Env, p hostproto.VolumeTaskParams, rep Reporter) (any, error) {
	s, err := volumeStore(env, p)
	if err != nil {
		return nil, err
	}
	err = NewPhased(env, rep).Run(ctx, PhaseVolumeDelete, func(ctx context.Context) error {
		return s.Delete(ctx, p.VolumeID)
	}, nil)
	if err != nil {
		return nil, err
	}
	return volumeResult(ctx, s, volume.Info{ID: p.VolumeID})
}

// volumeFree is the room for volumes the health probe reports; nil when
// the node keeps none or its data disk cannot be read.
func volumeFree(env *Env) *int64 {
	if env.Volumes == nil {
		return nil
	}
	free, err := env.Volumes.Free(context.Background())
	if err != nil {
		if env.Log != nil {
			env.Log.Warn("room for volumes unknown", "err", err)
		}
		return nil
	}
	return &free
}
