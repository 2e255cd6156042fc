package guestimage_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
)

// BenchmarkGuestFirstSSH is create → first ssh through hostd/libvirt:
// from starting the domain to the first OpenSSH login as the seed's user
// that finds the slice-ready marker (s-to-ssh), and to sshd's banner
// (s-to-banner), for the minimal test image (1 vCPU) and the production
// image (2 vCPUs). The sub-benchmark virt=kvm or virt=tcg says how the
// guest ran: TCG where KVM cannot run the kernel (this machine, whose
// virt=kvm is skipped with the reason). The images are built or taken
// from the cache before the timing starts.
func BenchmarkGuestFirstSSH(b *testing.B) {
	requireGuests(b)
	ctx := context.Background()
	h, err := libvirt.New(ctx, libvirt.Config{URI: systemURI})
	if err != nil {
		b.Fatalf("connect to %s: %v", systemURI, err)
	}
	b.Cleanup(func() { h.Close() })
	lan := newTestNetwork(b)
	for _, c := range []struct {
		name       string
		vcpus, mem int
		build      func(testing.TB, context.Context) guestimage.Result
	}{
		{"image=minimal", 1, 384, buildMinimal},
		{"image=debian", 2, 1024, buildImage},
	} {
		b.Run(c.name, func(b *testing.B) {
			img := c.build(b, ctx)
			kvm := kvmRunsKernelOnce(b, ctx, img.Image)
			virt := "kvm"
			if !kvm {
				virt = "tcg"
				// The KVM figure (goal < 20 s with a cached image) has its
				// own row; say why it is missing rather than leave it blank.
				b.Run("virt=kvm", func(b *testing.B) {
					b.Skip("KVM cannot run the guest kernel on this machine (e.g. kvm-pvm): no KVM figure here")
				})
			}
			b.Run("virt="+virt, func(b *testing.B) {
				var ready, banner time.Duration
				for i := 0; i < b.N; i++ {
					g := bootGuest(b, ctx, h, img.Image, kvm, c.vcpus, c.mem, lan.name, lan.host(20+i%200), lan.host(1), nil)
					ready += g.ready
					banner += g.booted
					b.StopTimer()
					dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					_ = h.Destroy(dctx, g.name)
					_ = h.Undefine(dctx, g.name)
					cancel()
					b.StartTimer()
				}
				b.Logf("%s under %s: %.1fs to first ssh", c.name, virt, ready.Seconds()/float64(b.N))
				b.ReportMetric(ready.Seconds()/float64(b.N), "s-to-ssh")
				b.ReportMetric(banner.Seconds()/float64(b.N), "s-to-banner")
			})
		})
	}
}
