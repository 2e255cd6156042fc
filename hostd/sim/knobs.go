package sim

import (
	"maps"
	"slices"
)

// Knobs that break a profile in the ways real hosts break. Each returns a
// changed copy; the receiver is left alone. IOMMUOff, NoKVM and
// NoVFIOModules are plain fields.

// Clone is a deep copy of the profile.
func (p Profile) Clone() Profile {
	c := p
	c.IOMMUArgs = slices.Clone(p.IOMMUArgs)
	c.NUMANodes = slices.Clone(p.NUMANodes)
	c.GPUs = slices.Clone(p.GPUs)
	c.NVMe = slices.Clone(p.NVMe)
	for i := range c.NVMe {
		c.NVMe[i].Mounts = maps.Clone(c.NVMe[i].Mounts)
	}
	c.VFs = slices.Clone(p.VFs)
	c.Other = slices.Clone(p.Other)
	c.Modules = slices.Clone(p.Modules)
	c.Commands = slices.Clone(p.Commands)
	return c
}

// BindGPU binds a GPU to another driver ("nvidia", or "" for none).
func (p Profile) BindGPU(pci, driver string) Profile {
	c := p.Clone()
	for i := range c.GPUs {
		if c.GPUs[i].PCI == pci {
			c.GPUs[i].Driver = driver
		}
	}
	return c
}

// ShareIOMMUGroup moves another device into a GPU's IOMMU group, as when
// the PCIe switch above them lacks ACS.
func (p Profile) ShareIOMMUGroup(gpuPCI, otherPCI string) Profile {
	c := p.Clone()
	group := -1
	for _, g := range c.GPUs {
		if g.PCI == gpuPCI {
			group = g.IOMMUGroup
		}
	}
	for _, f := range c.funcs() {
		if f.PCI == otherPCI {
			f.IOMMUGroup = group
		}
	}
	return c
}

// DropLastNVMe removes the data NVMe namespace with the highest PCI
// address on a NUMA node, leaving the node's last GPU without one.
func (p Profile) DropLastNVMe(numa int) Profile {
	c := p.Clone()
	last := -1
	for i, n := range c.NVMe {
		if n.NUMANode == numa && len(n.Mounts) == 0 && (last < 0 || n.PCI > c.NVMe[last].PCI) {
			last = i
		}
	}
	if last >= 0 {
		c.NVMe = slices.Delete(c.NVMe, last, last+1)
	}
	return c
}

// DropLastVF removes the VF with the highest PCI address on a NUMA node,
// leaving the node's last GPU without one.
func (p Profile) DropLastVF(numa int) Profile {
	c := p.Clone()
	last := -1
	for i, v := range c.VFs {
		if v.NUMANode == numa && (last < 0 || v.PCI > c.VFs[last].PCI) {
			last = i
		}
	}
	if last >= 0 {
		c.VFs = slices.Delete(c.VFs, last, last+1)
	}
	return c
}

// WithoutCommand takes a program off PATH.
func (p Profile) WithoutCommand(name string) Profile {
	c := p.Clone()
	c.Commands = slices.DeleteFunc(c.Commands, func(s string) bool { return s == name })
	return c
}

// funcs points at the Func of every PCI function the profile lists.
func (p *Profile) funcs() []*Func {
	var out []*Func
	for i := range p.GPUs {
		out = append(out, &p.GPUs[i].Func)
	}
	for i := range p.NVMe {
		out = append(out, &p.NVMe[i].Func)
	}
	for i := range p.VFs {
		out = append(out, &p.VFs[i].Func)
	}
	for i := range p.Other {
		out = append(out, &p.Other[i].Func)
	}
	return out
}
