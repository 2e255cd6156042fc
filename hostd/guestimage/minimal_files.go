package guestimage

// The minimal test guest's own files: /init and what it calls. They are
// inputs of the minimal image's cache key. The contract with hostd is the
// production image's (see the package comment): the same NoCloud seed,
// the same markers, the same driver check messages.

// Paths in the minimal guest.
const (
	// DetectVirt answers like systemd-detect-virt: "kvm", "qemu", or
	// "none" with exit status 1.
	DetectVirt = "/usr/bin/detect-virt"
	// minimalSeedAwk is seedYAMLAwk in the guest.
	minimalSeedAwk = "/usr/lib/gpuaas/seedyaml.awk"
	// minimalModules lists the module files /init loads, in order.
	minimalModules = "/etc/gpuaas/modules"
)

// minimalInit is /init: mount the kernel filesystems, load the modules,
// find and read the seed, apply it (host name, users and keys, network),
// run the driver check, write the marker, and hand over to busybox init,
// which keeps dropbear and the power-button watcher running and powers
// off when told.
const minimalInit = `#!/bin/sh
# gpuaas minimal test guest: /init (PID 1 until it execs busybox init).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox mkdir -p /proc /sys /dev /run /tmp /root /home /var/log /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
log() { echo "gpuaas-init: $*" >/dev/console; }
mkdir -p -m 0755 /run/gpuaas /run/gpuaas/seed

# The kernel names the hypervisor it found; the ring buffer is fresh now.
dmesg | grep -m1 'Hypervisor detected' >/run/gpuaas/hypervisor || true

while read -r m; do
	insmod "/lib/modules/$(uname -r)/$m" 2>/dev/null || log "insmod $m failed"
done <` + minimalModules + `

# The seed is an ISO 9660 disk labelled cidata; virtio disks appear
# asynchronously after their module loads.
seed=
i=0
while [ $i -lt 100 ] && [ -z "$seed" ]; do
	for dev in /dev/vd*; do
		[ -b "$dev" ] || continue
		if mount -t iso9660 -o ro "$dev" /run/gpuaas/seed 2>/dev/null; then
			if [ -f /run/gpuaas/seed/meta-data ]; then seed=$dev; break; fi
			umount /run/gpuaas/seed
		fi
	done
	[ -n "$seed" ] || { sleep 0.1; i=$((i + 1)); }
done
for f in user-data meta-data network-config; do
	if [ -n "$seed" ] && [ -f "/run/gpuaas/seed/$f" ]; then
		awk -f ` + minimalSeedAwk + ` "/run/gpuaas/seed/$f" >"/run/gpuaas/$f.flat"
	else
		: >"/run/gpuaas/$f.flat"
	fi
done
[ -n "$seed" ] && log "seed on $seed" || log "no NoCloud seed (a disk labelled cidata with meta-data) found"

# get FILE PATH prints the value at PATH of a flattened seed file.
get() { awk -F '\t' -v k="$2" '$1 == k { print substr($0, length(k) + 2); exit }' "/run/gpuaas/$1.flat"; }
# list FILE PREFIX prints the values of the sequence at PREFIX.
list() { awk -F '\t' -v k="$2" 'index($1, k ".") == 1 && substr($1, length(k) + 2) ~ /^[0-9]+$/ { print substr($0, length($1) + 2) }' "/run/gpuaas/$1.flat"; }

# Host name: user-data's hostname, else meta-data's local-hostname.
name=$(get user-data hostname)
[ -n "$name" ] || name=$(get meta-data local-hostname)
[ -n "$name" ] || name=localhost
hostname "$name"
echo "$name" >/etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$name" >/etc/hosts

# Users: root has no login (dropbear -w); a user whose entry has sudo may
# become root with sudo (su to a root without a password; no password
# login exists at all).
printf 'root:*:0:0:root:/root:/bin/sh\n' >/etc/passwd
printf 'root:x:0:\ntty:x:5:\n' >/etc/group
printf '/bin/sh\n/bin/ash\n/bin/bash\n' >/etc/shells
uid=1000
n=0
while :; do
	user=$(get user-data "users.$n.name")
	[ -n "$user" ] || break
	shell=$(get user-data "users.$n.shell")
	[ -x "$shell" ] || shell=/bin/sh
	gecos=$(get user-data "users.$n.gecos" | tr -d ':')
	echo "$user:*:$uid:$uid:$gecos:/home/$user:$shell" >>/etc/passwd
	echo "$user:x:$uid:" >>/etc/group
	mkdir -p -m 0700 "/home/$user/.ssh"
	list user-data "users.$n.ssh_authorized_keys" >"/home/$user/.ssh/authorized_keys"
	chmod 0600 "/home/$user/.ssh/authorized_keys"
	chown -R "$uid:$uid" "/home/$user"
	chmod 0755 "/home/$user"
	if [ -n "$(get user-data "users.$n.sudo")" ]; then
		sed -i 's/^root:\*:/root::/' /etc/passwd
		chmod 4755 /bin/busybox
	fi
	log "user $user ($(wc -l <"/home/$user/.ssh/authorized_keys") keys)"
	n=$((n + 1))
	uid=$((uid + 1))
done

# Volumes: each "serial:path" (space-separated) of meta-data's ` + MetaVolumes + ` is the virtio disk
# with that serial (/sys/block/vdX/serial; no udev here for /dev/disk/by-id),
# an ext4 the host made: mounted at path, its files given to the renter (the
# first user) when another uid owns its root. A volume that cannot be mounted
# fails the slice (the failed marker names it) rather than leaving an empty
# directory where the renter's data should be.
volfail=
ruid=$(awk -F: -v u="$(get user-data users.0.name)" '$1 == u { print $3 }' /etc/passwd)
for v in $(get meta-data ` + MetaVolumes + `); do
	serial=${v%%:*}
	path=${v#*:}
	dev=
	i=0
	while [ -z "$dev" ] && [ $i -lt 100 ]; do
		for f in /sys/block/vd*/serial; do
			if [ "$(cat "$f" 2>/dev/null)" = "$serial" ]; then d=${f%/serial}; dev=/dev/${d##*/}; fi
		done
		[ -n "$dev" ] || { sleep 0.1; i=$((i + 1)); }
	done
	if [ -z "$dev" ]; then volfail="$volfail volume $serial: no disk with serial $serial;"; continue; fi
	mkdir -p "$path"
	if ! mount -t ext4 -o nodev,nosuid "$dev" "$path"; then volfail="$volfail volume $serial: mount $dev at $path failed;"; continue; fi
	if [ -n "$ruid" ] && [ "$(ls -dn "$path" | awk '{ print $3 }')" != "$ruid" ]; then chown -R "$ruid:$ruid" "$path"; fi
	log "volume $serial on $dev at $path"
done

# Network: each ethernets entry matched by MAC, renamed, its static
# addresses and routes. No DHCP: addresses come from the seed.
ip link set lo up
for id in $(awk -F '\t' '$1 ~ /^ethernets\./ { split($1, p, "."); print p[2] }' /run/gpuaas/network-config.flat | sort -u); do
	e=ethernets.$id
	mac=$(get network-config "$e.match.macaddress" | tr 'A-Z' 'a-z')
	dev=
	for d in /sys/class/net/*; do
		[ "$(cat "$d/address" 2>/dev/null)" = "$mac" ] && dev=${d##*/}
	done
	[ -n "$mac" ] || dev=$id
	if [ -z "$dev" ] || [ ! -e "/sys/class/net/$dev" ]; then log "network $id: no interface with MAC $mac"; continue; fi
	to=$(get network-config "$e.set-name")
	if [ -n "$to" ] && [ "$to" != "$dev" ]; then ip link set dev "$dev" name "$to" && dev=$to; fi
	for a in $(list network-config "$e.addresses"); do ip addr add "$a" dev "$dev"; done
	ip link set dev "$dev" up
	r=0
	while [ -n "$(get network-config "$e.routes.$r.via")" ]; do
		via=$(get network-config "$e.routes.$r.via")
		dst=$(get network-config "$e.routes.$r.to")
		case "$dst" in default | 0.0.0.0/0 | "") dst=default ;; esac
		ip route add "$dst" via "$via" dev "$dev"
		r=$((r + 1))
	done
	list network-config "$e.nameservers.addresses" | sed 's/^/nameserver /' >/etc/resolv.conf
	log "network $dev: $(list network-config "$e.addresses" | tr '\n' ' ')"
done

# The driver check, then the marker hostd waits for.
out=$(` + minimalDriverCheck + ` 2>&1)
if [ $? -eq 0 ]; then marker=` + ReadyMarker + `; else marker=` + FailedMarker + `; fi
if [ -n "$volfail" ]; then marker=` + FailedMarker + `; out="$volfail $out"; fi
printf '%s\n' "$out" >"$marker.tmp" && chmod 0644 "$marker.tmp" && mv "$marker.tmp" "$marker"
echo "gpuaas-slice-ready: $(basename "$marker"): $out" >/dev/console

exec /bin/busybox init
`

// minimalDriverCheck is the guest path of minimalDriverCheckScript.
const minimalDriverCheck = "/usr/local/sbin/gpuaas-driver-check"

// minimalDriverCheckScript is the production driver check (files.go's
// driverCheckScript) in shell, reading the flattened meta-data: the same
// rules and the same messages.
const minimalDriverCheckScript = `#!/bin/sh
# gpuaas-driver-check: does this slice see the GPUs its seed promises?
# Exit 0 and "ok ..." when it does; exit 1 and the reason when not.
md=${1:-/run/gpuaas/meta-data.flat}
get() { awk -F '\t' -v k="$1" '$1 == k { print substr($0, length(k) + 2); exit }' "$md" 2>/dev/null; }
id=$(get instance-id)
if [ -z "$id" ]; then
	echo "no cloud-init meta-data with an instance-id: the NoCloud seed was not read"
	exit 1
fi
if [ "$(get ` + MetaDriverCheck + `)" = fail ]; then
	echo "driver check forced to fail by the seed (` + MetaDriverCheck + `: fail)"
	exit 1
fi
want=$(get ` + MetaGPUs + `)
want=${want:-0}
case "$want" in
*[!0-9]*)
	echo "seed key ` + MetaGPUs + ` is not a number: '$want'"
	exit 1
	;;
esac
if [ "$want" -eq 0 ]; then
	echo "ok: no GPUs expected (instance $id)"
	exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "expected $want GPUs but nvidia-smi is not installed: no GPU driver"
	exit 1
fi
list=$(nvidia-smi -L 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
	echo "nvidia-smi -L exited $rc: $(echo "$list" | head -c 200)"
	exit 1
fi
got=$(echo "$list" | grep -c '^GPU ')
if [ "$got" -ne "$want" ]; then
	echo "expected $want GPUs, nvidia-smi -L lists $got"
	exit 1
fi
echo "ok: $got GPUs (instance $id)"
# One "uuid: GPU-..." line per GPU listed: controld compares them with the
# slots' (docs/slices.md, "Driver check").
echo "$list" | sed -n 's/^GPU [0-9]*:.*(UUID: \(GPU-[^)]*\)).*$/uuid: \1/p'
`

// simNvidiaSMI is the test image's simulated nvidia-smi, at
// /usr/bin/nvidia-smi in the minimal guest only (the production image
// has none: its check needs the real driver). It answers -L with the
// UUIDs the seed's meta-data lists under MetaSimGPUUUIDs, marked as
// simulated (api.SimGPUUUIDPrefix), and "No devices were found" (exit 6,
// as nvidia-smi) when the seed lists none. hostd seeds them only on a
// node that declares no passthrough, and controld accepts simulated
// UUIDs only from a test node.
const simNvidiaSMI = "/usr/bin/nvidia-smi"

const simNvidiaSMIScript = `#!/bin/sh
# nvidia-smi: SIMULATED (gpuaas minimal test image only; no GPU, no driver).
md=${GPUAAS_META:-/run/gpuaas/meta-data.flat}
k=` + MetaSimGPUUUIDs + `
case "$1" in
-L | --list-gpus) ;;
*)
	echo "simulated nvidia-smi: only -L is answered" >&2
	exit 2
	;;
esac
uuids=$(awk -F '\t' -v k="$k" '$1 == k { print substr($0, length(k) + 2); exit }' "$md" 2>/dev/null)
if [ -z "$uuids" ]; then
	echo "No devices were found"
	exit 6
fi
i=0
for u in $uuids; do
	echo "GPU $i: Simulated NVIDIA GPU (UUID: ` + SimUUIDPrefix + `${u#GPU-})"
	i=$((i + 1))
done
`

// detectVirtScript answers as systemd-detect-virt does for the two
// hypervisors slices run on: the kernel's CPUID finding ("Hypervisor
// detected: KVM", recorded at boot) or the KVM clock means kvm; QEMU's
// DMI vendor without them means TCG, "qemu".
const detectVirtScript = `#!/bin/sh
# detect-virt: kvm, qemu, or none (exit 1), like systemd-detect-virt.
if grep -q 'Hypervisor detected: KVM' /run/gpuaas/hypervisor 2>/dev/null ||
	grep -qw kvm-clock /sys/devices/system/clocksource/clocksource0/available_clocksource 2>/dev/null; then
	echo kvm
	exit 0
fi
if [ "$(cat /sys/class/dmi/id/sys_vendor 2>/dev/null)" = QEMU ]; then
	echo qemu
	exit 0
fi
echo none
exit 1
`

// sudoScript runs a command as root for a user the seed gave sudo: su to
// a root without a password (busybox su, set-uid).
const sudoScript = `#!/bin/sh
# sudo: the minimal guest's stand-in for the seed's "sudo: ALL=(ALL) NOPASSWD:ALL".
[ $# -gt 0 ] || { echo "usage: sudo COMMAND [ARG]..." >&2; exit 2; }
exec /bin/su -s /bin/sh -c 'exec "$0" "$@"' -- root "$@"
`

// powerButtonScript waits for a press of an ACPI power button and powers
// off through busybox init (which runs the shutdown actions).
const powerButtonScript = `#!/bin/sh
# gpuaas-power-button: poweroff when the ACPI power button is pressed.
for d in /sys/class/input/event*; do
	[ "$(cat "$d/device/name" 2>/dev/null)" = "Power Button" ] || continue
	( dd if="/dev/input/${d##*/}" of=/dev/null bs=24 count=1 2>/dev/null && echo "gpuaas: power button, powering off" >/dev/console && poweroff ) &
done
wait
sleep 3600
`

// inittab is busybox init's: dropbear in the foreground (-F), host keys
// made on first connection (-R), no password logins (-s), no root logins
// (-w), logging to syslog (none here), not to the serial console: a line
// per connection on an emulated UART slows every login under TCG, and
// the console is what a readiness failure quotes; the power-button
// watcher.
const minimalInittab = `::respawn:/usr/sbin/dropbear -F -R -s -w -p 22
::respawn:/usr/lib/gpuaas/power-button
::shutdown:/bin/sync
::shutdown:/bin/umount -a -r
`
