package jobspec

import (
	"errors"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/internal/api"
)

// volumes is a top-level key of job.yaml, documented after release.
func init() { keys[""] = append(keys[""], "volumes") }

// MaxVolumes bounds the volumes a job mounts.
const MaxVolumes = 16

// volumes reads `volumes:`, a list of `NAME[:/path]` strings read as
// `gpuaas alloc create --volume` reads its flag (api.ParseVolumeMount:
// the same paths allowed, the same reasons): an entry that is not one is
// refused naming volumes[i] and its line. A volume named twice is
// refused too: an allocation mounts a volume once.
func (p *parser) volumes(field string, n *yaml.Node) ([]api.VolumeMount, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.fail(field, n, "want a list of NAME or NAME:/path, got %s", kindName(n))
	}
	if len(n.Content) > MaxVolumes {
		return nil, p.fail(field, n, "%d volumes; at most %d", len(n.Content), MaxVolumes)
	}
	var out []api.VolumeMount
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		p.lines[f] = item.Line
		if item.Kind != yaml.ScalarNode || item.Tag != "!!str" {
			return nil, p.fail(f, item, "want NAME or NAME:/path, got %s", describe(item))
		}
		m, err := api.ParseVolumeMount(item.Value)
		if err != nil {
			return nil, p.fail(f, item, "%s", volumeReason(item.Value, err))
		}
		if err := api.CheckVolumeName(m.Volume); err != nil {
			return nil, p.fail(f, item, "%s", volumeReason(item.Value, err))
		}
		if slices.ContainsFunc(out, func(o api.VolumeMount) bool { return o.Volume == m.Volume }) {
			return nil, p.fail(f, item, "volume %q is listed twice", m.Volume)
		}
		out = append(out, m)
	}
	return out, nil
}

// volumeReason is an api error's message without its code.
func volumeReason(entry string, err error) string {
	msg := err.Error()
	if ae := (*api.Error)(nil); errors.As(err, &ae) {
		msg = ae.Message
	}
	return fmt.Sprintf("%q: %s", entry, msg)
}
