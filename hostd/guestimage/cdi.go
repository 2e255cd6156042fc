package guestimage

// GuestCDI writes the guest's CDI spec of its GPUs at boot (run by
// gpuaas-slice-ready, after the driver check has loaded the driver): a
// slice's workloads run in the guest with rootless podman, which reads
// specs from /var/run/cdi only, and hostd reads this one through the
// guest's sshd to name the devices (docs/apps.md, "Slices";
// docs/decisions/0047-workloads-in-slices.md). Every GPU the guest has is
// its slice's. The spec is the one hostd writes on a bare-metal node
// (hostd/workload.GPUSpec): kind gpuaas.io/gpu, devices
// <instance>-<minor> from the driver's records, the control nodes as
// common edits; a node at its own path is a deviceNode, elsewhere (a
// test's tree) a bind mount at /dev/<name>.
const GuestCDI = "/usr/local/sbin/gpuaas-guest-cdi"

// guestCDIScript: gpuaas-guest-cdi [ROOT [NAME]]; ROOT ("/") holds
// proc/driver/nvidia/gpus and dev/, NAME (the host name: the allocation)
// names the spec, written to ROOT/var/run/cdi/gpuaas-NAME.json. No GPU on
// the driver: no spec.
const guestCDIScript = `#!/usr/bin/python3
# gpuaas-guest-cdi: write the CDI spec of this guest's GPUs.
import json, os, re, socket, sys

root = sys.argv[1] if len(sys.argv) > 1 else "/"
name = sys.argv[2] if len(sys.argv) > 2 else socket.gethostname()
if not re.match(r"^[a-z0-9][a-z0-9-]{0,62}$", name):
    sys.exit("gpuaas-guest-cdi: bad name %r" % name)
out = os.path.join(root, "var/run/cdi", "gpuaas-%s.json" % name)
gpus_dir = os.path.join(root, "proc/driver/nvidia/gpus")

def edit(node):
    host = os.path.realpath(os.path.join(root, "dev", node))
    if not os.path.exists(host):
        raise FileNotFoundError(host)
    ctr = "/dev/" + node
    if host == ctr:
        return {"deviceNodes": [{"path": ctr}]}
    return {"mounts": [{"hostPath": host, "containerPath": ctr, "options": ["bind", "nosuid", "noexec"]}]}

minors = []
for pci in sorted(os.listdir(gpus_dir)) if os.path.isdir(gpus_dir) else []:
    with open(os.path.join(gpus_dir, pci, "information")) as f:
        m = re.search(r"^Device Minor:\s*(\d+)", f.read(), re.M)
    if not m:
        sys.exit("gpuaas-guest-cdi: %s: no device minor" % pci)
    minors.append(int(m.group(1)))
if not minors:
    if os.path.exists(out):
        os.remove(out)
    sys.exit(0)
spec = {"cdiVersion": "0.5.0", "kind": "gpuaas.io/gpu", "devices": []}
for minor in minors:
    spec["devices"].append({"name": "%s-%d" % (name, minor), "containerEdits": edit("nvidia%d" % minor)})
common = {}
for node in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
    try:
        e = edit(node)
    except FileNotFoundError:
        continue
    for k, v in e.items():
        common.setdefault(k, []).extend(v)
if common:
    spec["containerEdits"] = common
os.makedirs(os.path.dirname(out), mode=0o755, exist_ok=True)
with open(out + ".tmp", "w") as f:
    json.dump(spec, f, indent=2)
os.chmod(out + ".tmp", 0o644)
os.rename(out + ".tmp", out)
`
