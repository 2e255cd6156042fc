package api

import "strings"

// DefaultShape is what a node is enrolled as when nobody says.
const DefaultShape = ShapeGPUSlice

// Shapes lists the shapes of what can be rented, in the order help texts
// name them.
func Shapes() []string { return []string{ShapeGPUSlice, ShapeBaremetal} }

// KnownShape reports whether shape is one of Shapes.
func KnownShape(shape string) bool { return shape == ShapeGPUSlice || shape == ShapeBaremetal }

// ShapeList names the shapes for an error or a help text: "gpu_slice or
// baremetal".
func ShapeList() string { return strings.Join(Shapes(), " or ") }

// DriverChecked reports whether nodes of shape have their GPUs' driver
// checked before an allocation goes active (slice guests; bare metal is the
// node's own driver), which is what a test node relaxes.
func DriverChecked(shape string) bool { return shape == ShapeGPUSlice }

// ShortShape names a shape in a few letters for tables: "slice", "metal".
func ShortShape(shape string) string {
	if shape == ShapeBaremetal {
		return "metal"
	}
	return "slice"
}

// WholeNode reports whether the SKU rents whole nodes (bare metal), whose
// GPU count is the node's.
func (s SKU) WholeNode() bool { return s.Shape == ShapeBaremetal }

// JobsRunInImages reports whether a job on an allocation of shape may
// name an image (docs/jobs.md "Images"): bare metal only, for now.
func JobsRunInImages(shape string) bool { return shape == ShapeBaremetal }

// VolumeAsDisk reports whether a volume reaches an allocation of shape as
// a disk of its VM (docs/decisions/0030-volumes-in-slices.md), whose node
// must say its slices take volumes; otherwise the node mounts it.
func VolumeAsDisk(shape string) bool { return shape == ShapeGPUSlice }
