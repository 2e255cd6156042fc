package guestimage

// The files the build adds to the debootstrapped tree, by path inside it.
// They are inputs of the cache key: changing one rebuilds the image.

// guestFiles maps a path in the guest to its mode and content.
var guestFiles = []guestFile{
	{"/etc/fstab", 0o644, "LABEL=" + RootLabel + " / ext4 rw,discard,errors=remount-ro 0 1\n"},
	// NoCloud only: probing the other datasources (EC2's metadata address
	// and so on) costs seconds on every boot. systemd-networkd renders the
	// seed's network config (ifupdown is not installed).
	{"/etc/cloud/cloud.cfg.d/90-gpuaas.cfg", 0o644, `# gpuaas slice guest
datasource_list: [NoCloud, None]
system_info:
  network:
    renderers: [networkd]
`},
	{DriverCheck, 0o755, driverCheckScript},
	{"/usr/local/sbin/gpuaas-slice-ready", 0o755, sliceReadyScript},
	{"/etc/systemd/system/gpuaas-slice-ready.service", 0o644, sliceReadyUnit},
	// Present, so that useradd (cloud-init's) gives the renter's user a
	// subordinate id range for rootless podman (shadow allocates one only
	// where the files exist); no user has one at build time.
	{"/etc/subuid", 0o644, ""},
	{"/etc/subgid", 0o644, ""},
	{GuestCDI, 0o755, guestCDIScript}, // cdi.go
}

type guestFile struct {
	path    string
	mode    uint32
	content string
}

// driverCheckScript passes when the guest sees the GPUs the seed says it
// has (nvidia-smi -L on a GPU guest), and fails closed otherwise: no
// nvidia-smi, an error from it, a different count, or a seed that says
// "fail". It prints one line: the reason.
const driverCheckScript = `#!/usr/bin/python3
# gpuaas-driver-check: does this slice see the GPUs its seed promises?
# Exit 0 and "ok ..." when it does; exit 1 and the reason when not.
import json, re, shutil, subprocess, sys

def meta():
    # An argument names the instance data to read instead (tests).
    paths = sys.argv[1:] or ["/run/cloud-init/instance-data-sensitive.json", "/run/cloud-init/instance-data.json"]
    for path in paths:
        try:
            with open(path) as f:
                ds = json.load(f).get("ds", {})
        except (OSError, ValueError):
            continue
        # No meta-data is not "no GPUs": fail closed.
        md = ds.get("meta_data") or ds.get("meta-data")
        if isinstance(md, dict) and md.get("instance-id"):
            return md
    return None

md = meta()
if md is None:
    print("no cloud-init meta-data with an instance-id: the NoCloud seed was not read")
    sys.exit(1)
if str(md.get("` + MetaDriverCheck + `", "")).strip() == "fail":
    print("driver check forced to fail by the seed (` + MetaDriverCheck + `: fail)")
    sys.exit(1)
try:
    want = int(md.get("` + MetaGPUs + `", 0))
except (TypeError, ValueError):
    print("seed key ` + MetaGPUs + ` is not a number: %r" % md.get("` + MetaGPUs + `"))
    sys.exit(1)
if want == 0:
    print("ok: no GPUs expected (instance %s)" % md["instance-id"])
    sys.exit(0)
if shutil.which("nvidia-smi") is None:
    print("expected %d GPUs but nvidia-smi is not installed: no GPU driver" % want)
    sys.exit(1)
r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
if r.returncode != 0:
    print("nvidia-smi -L exited %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[:200]))
    sys.exit(1)
got = sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))
if got != want:
    print("expected %d GPUs, nvidia-smi -L lists %d" % (want, got))
    sys.exit(1)
print("ok: %d GPUs (instance %s)" % (got, md["instance-id"]))
# One "uuid: GPU-..." line per GPU listed: controld compares them with the
# slots' (docs/slices.md, "Driver check").
for m in re.finditer(r"^GPU \d+:.*\(UUID: (GPU-[^)]*)\)", r.stdout, re.M):
    print("uuid: " + m.group(1))
`

// sliceReadyScript runs the driver check and writes the marker hostd
// waits for, atomically, so a reader never sees half a file.
const sliceReadyScript = `#!/bin/sh
# gpuaas-slice-ready: after cloud-init, run the driver check and write
# ` + ReadyMarker + ` (passed) or ` + FailedMarker + ` (the reason).
set -u
mkdir -p -m 0755 /run/gpuaas
out=$(` + DriverCheck + ` 2>&1)
rc=$?
if [ $rc -eq 0 ]; then marker=` + ReadyMarker + `; else marker=` + FailedMarker + `; fi
# The GPUs the check saw, as a CDI spec for the renter's podman (cdi.go).
` + GuestCDI + ` >/dev/console 2>&1 || true
# A volume cloud-init could not mount (the seed's runcmd wrote it) fails
# the slice: the renter's data would be missing at its path.
if [ -s ` + VolumesFailed + ` ]; then marker=` + FailedMarker + `; out="$(cat ` + VolumesFailed + `) $out"; fi
printf '%s\n' "$out" >"$marker.tmp" && chmod 0644 "$marker.tmp" && mv "$marker.tmp" "$marker"
echo "gpuaas-slice-ready: $(basename "$marker"): $out" >/dev/console 2>/dev/null || true
exit 0
`

// sliceReadyUnit orders the readiness script after cloud-init's last
// stage (users, keys and network are in place) and sshd. cloud-final
// runs after multi-user.target, so the unit hangs off cloud-init.target.
const sliceReadyUnit = `[Unit]
Description=gpuaas slice readiness (driver check, then the slice-ready marker)
After=cloud-final.service ssh.service
Wants=cloud-final.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpuaas-slice-ready

[Install]
WantedBy=cloud-init.target
`
