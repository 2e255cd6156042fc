package common

import "github.com/gpuaas/gpuaas/internal/api"

// SKUByID returns the entry of id in skus (the catalog as last loaded).
func SKUByID(skus []api.SKU, id string) (api.SKU, bool) {
	for _, s := range skus {
		if s.ID == id {
			return s, true
		}
	}
	return api.SKU{}, false
}

// HourlyMinor is what gpus GPUs of s cost per hour, in minor units.
func HourlyMinor(s api.SKU, gpus int) int64 { return s.PricePerGPUHourMinor * int64(gpus) }
