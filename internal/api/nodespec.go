package api

// NodeSpec describes a node to register: its name, shape and GPU model and
// the slots it is built to have. controld registers it (controld/node);
// hostd's sim host profiles produce it, so hostd needs nothing of
// controld's to describe a host.
type NodeSpec struct {
	Name     string
	Shape    string // ShapeBaremetal or ShapeGPUSlice
	GPUModel string
	Slots    []SlotSpec
}

// SlotSpec describes one GPU slot of a NodeSpec: the GPU with the NVMe
// namespace and fabric VF that travel with it, and the management NIC's
// MAC and IP of the VM that gets it.
type SlotSpec struct {
	GPUPCI   string
	NVMe     string
	FabricVF string
	NUMANode int
	MAC      string
	IP       string
}
