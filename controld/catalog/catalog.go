// Package catalog owns skus: what can be rented and at what price.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/suggest"
)

// DefaultImage is the base image slice VMs boot unless a SKU says
// otherwise. Its checksum is that of the image the simulated hosts carry
// (hostd/sim); operators pin their real image's checksum per SKU.
var DefaultImage = api.VMImage{Name: "ubuntu-24.04-gpu", SHA256: "23b18fb2fcf105c89307a2d13dd66af650d5516d167d8821bd025c3d3611a81a"}

// Defaults is the catalog `gpuaas dev` and fresh installs are seeded with.
var Defaults = []api.SKU{
	{ID: "h200-slice", Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUCounts: []int{1, 2, 4, 8},
		PricePerGPUHourMinor: 350, Currency: "usd", Description: "VM with whole H200 GPUs passed through",
		VCPUsPerGPU: 16, MemoryMiBPerGPU: 196608, Image: DefaultImage},
	{ID: "h100-slice", Shape: api.ShapeGPUSlice, GPUModel: "H100", GPUCounts: []int{1, 2, 4, 8},
		PricePerGPUHourMinor: 250, Currency: "usd", Description: "VM with whole H100 GPUs passed through",
		VCPUsPerGPU: 16, MemoryMiBPerGPU: 131072, Image: DefaultImage},
	{ID: "h100-baremetal", Shape: api.ShapeBaremetal, GPUModel: "H100", GPUCounts: []int{8},
		PricePerGPUHourMinor: 220, Currency: "usd", Description: "a whole 8×H100 node"},
}

// Seed inserts the SKUs that do not exist yet; existing ones are kept as
// the operator left them.
func Seed(ctx context.Context, q store.Querier, skus []api.SKU) error {
	for _, s := range skus {
		if s.VCPUsPerGPU == 0 {
			s.VCPUsPerGPU = 8
		}
		if s.MemoryMiBPerGPU == 0 {
			s.MemoryMiBPerGPU = 65536
		}
		_, err := q.Exec(ctx, `INSERT INTO skus (id, shape, gpu_model, gpu_counts, price_per_gpu_hour_minor, currency, description,
			vcpus_per_gpu, memory_mib_per_gpu, image, image_sha256)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) ON CONFLICT (id) DO NOTHING`,
			s.ID, s.Shape, s.GPUModel, s.GPUCounts, s.PricePerGPUHourMinor, s.Currency, s.Description,
			s.VCPUsPerGPU, s.MemoryMiBPerGPU, s.Image.Name, s.Image.SHA256)
		if err != nil {
			return fmt.Errorf("seed sku %s: %w", s.ID, err)
		}
	}
	return nil
}

const skuColumns = `SELECT id, shape, gpu_model, gpu_counts, price_per_gpu_hour_minor, currency, description,
	vcpus_per_gpu, memory_mib_per_gpu, image, image_sha256 FROM skus`

// List returns the active SKUs.
func List(ctx context.Context, q store.Querier) ([]api.SKU, error) {
	rows, err := q.Query(ctx, skuColumns+` WHERE active ORDER BY shape DESC, gpu_model, id`)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanSKU)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", err)
	}
	return out, nil
}

// Get returns one active SKU; an unknown id is not_found with the list of
// ids that do exist in the hint.
func Get(ctx context.Context, q store.Querier, id string) (api.SKU, error) {
	rows, err := q.Query(ctx, getSQL, id)
	if err != nil {
		return api.SKU{}, fmt.Errorf("get sku: %w", err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, scanSKU)
	if errors.Is(err, pgx.ErrNoRows) {
		all, _ := List(ctx, q)
		names := make([]string, 0, len(all))
		for _, k := range all {
			names = append(names, k.ID)
		}
		return s, api.Errorf(api.CodeNotFound, "unknown SKU %q%s", id, suggest.DidYouMean(id, names)).
			WithHint("available: " + strings.Join(names, ", ") + " (see `gpuaas catalog list`)")
	}
	if err != nil {
		return s, fmt.Errorf("get sku: %w", err)
	}
	return s, nil
}

// getSQL reads an active SKU by id (Get, and QueueGet in a caller's batch).
const getSQL = skuColumns + ` WHERE id=$1 AND active`

// Lookup is Get's read queued in a caller's batch (QueueGet), so it
// shares its round trip; Result then answers as Get does.
type Lookup struct {
	id    string
	sku   api.SKU
	found bool
}

// QueueGet queues Get(id)'s read in b.
func QueueGet(b *pgx.Batch, dst *Lookup, id string) {
	dst.id = id
	b.Queue(getSQL, id).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("get sku: %w", err)
		}
		s, err := pgx.CollectExactlyOneRow(rows, scanSKU)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get sku: %w", err)
		}
		dst.sku, dst.found = s, true
		return nil
	}
}

// Result is Get's answer on the read QueueGet queued (once the batch was
// sent); q serves only the unknown SKU's error (Get reads it again).
func (l *Lookup) Result(ctx context.Context, q store.Querier) (api.SKU, error) {
	if l.found {
		return l.sku, nil
	}
	return Get(ctx, q, l.id)
}

// Price returns a SKU's price per GPU-hour and its currency, active or
// not: an allocation placed before a SKU was retired still has a price.
func Price(ctx context.Context, q store.Querier, id string) (perGPUHourMinor int64, currency string, err error) {
	err = q.QueryRow(ctx, `SELECT price_per_gpu_hour_minor, currency FROM skus WHERE id=$1`, id).Scan(&perGPUHourMinor, &currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", api.Errorf(api.CodeNotFound, "unknown SKU %q", id)
	}
	if err != nil {
		return 0, "", fmt.Errorf("sku price: %w", err)
	}
	return perGPUHourMinor, currency, nil
}

func scanSKU(r pgx.CollectableRow) (api.SKU, error) {
	var s api.SKU
	var counts []int32
	err := r.Scan(&s.ID, &s.Shape, &s.GPUModel, &counts, &s.PricePerGPUHourMinor, &s.Currency, &s.Description,
		&s.VCPUsPerGPU, &s.MemoryMiBPerGPU, &s.Image.Name, &s.Image.SHA256)
	for _, c := range counts {
		s.GPUCounts = append(s.GPUCounts, int(c))
	}
	return s, err
}

// CheckGPUs validates a requested GPU count against the SKU.
func CheckGPUs(s api.SKU, gpus int) error {
	if slices.Contains(s.GPUCounts, gpus) {
		return nil
	}
	allowed := make([]string, len(s.GPUCounts))
	for i, c := range s.GPUCounts {
		allowed[i] = strconv.Itoa(c)
	}
	return api.Errorf(api.CodeInvalidArgument, "SKU %s does not offer %d GPUs", s.ID, gpus).
		WithHint("allowed GPU counts: " + strings.Join(allowed, ", "))
}
