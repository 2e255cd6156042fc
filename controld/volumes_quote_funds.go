package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// quoteVolume is volume.quote's answer (`volume create --dry-run`): the
// create's funds check first, as volumeCreate makes it (insufficient_funds
// or budget_exceeded with the same message), then its other checks and
// the price. The funds check takes the project's funds lock, so it runs
// in a transaction that is always rolled back: a dry run writes nothing,
// not even the refusal's audit row a real create writes.
func (s *Server) quoteVolume(ctx context.Context, p api.Project, userID string, a volumes.CreateArgs) (api.VolumeQuote, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return api.VolumeQuote{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := s.requireVolumeFunds(ctx, tx, p, userID, a.SizeBytes); err != nil {
		return api.VolumeQuote{}, err
	}
	return volumes.Quote(ctx, tx, a)
}
