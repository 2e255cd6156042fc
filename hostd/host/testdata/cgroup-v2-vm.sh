#!/bin/sh
# Runs the cgroup tests that need no accounts (TestCgroupsContainAnAllocation
# and the unit tests) on cgroup v2 with every controller, in a minimal VM:
# machines whose memory controller is v1 (hybrid, as the sandbox these were
# written in) cannot test the v2 path themselves. Needs qemu-system-x86_64
# and apt-get download of Debian's cloud kernel, busybox-static and cpio
# (bookworm; TCG is enough, about a minute). hostd's stand-in runs in the
# child cgroup /svc, as under systemd, or at the root with ROOT=1.
#
#   hostd/host/testdata/cgroup-v2-vm.sh   (from the repository's root)
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go test -c -o "$work/hosttest" ./hostd/host/
cd "$work"
kernel=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image/ {print $2; exit}')
apt-get download "$kernel" busybox-static cpio >/dev/null 2>&1
for d in *.deb; do dpkg-deb -x "$d" x; done
mkdir -p root/bin root/proc root/sys root/dev root/tmp
cp x/bin/busybox hosttest root/bin/
for a in sh head tail sleep setsid mount mkdir cat echo poweroff; do ln -s busybox "root/bin/$a"; done
join='echo $$ > /sys/fs/cgroup/svc/cgroup.procs'
[ "${ROOT:-}" = 1 ] && join=true
cat > root/init <<INIT
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "+memory +pids +cpu" > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/svc
$join
cd /tmp
/bin/hosttest -test.v -test.count=1 -test.run 'TestCgroupsContainAnAllocation|TestCgroupDiscovery|TestTenantMemory|TestNodeWithoutUsableCgroupsWarns' 2>&1
poweroff -f
INIT
chmod +x root/init
(cd root && find . | ../x/bin/cpio -o -H newc 2>/dev/null | gzip -1 > ../initrd.gz)
timeout 600 qemu-system-x86_64 -machine q35 -accel tcg -cpu max -smp 1 -m 1024 \
  -kernel x/boot/vmlinuz-* -initrd initrd.gz -append "console=ttyS0 rdinit=/init panic=-1 quiet" \
  -nographic -no-reboot > vm.log 2>&1 || true
grep -aE '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+cgroups)' vm.log
grep -aq '^PASS' vm.log
