package libvirt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// These tests drive a real libvirtd through go-libvirt with libvirt's test
// driver (test:///default): the real RPC protocol, schema validation and
// domain bookkeeping, with simulated guests. Its domains are shared by all
// connections to one libvirtd, so every test names its own.

const testURI = "test:///default"

// requireLibvirtd fails the test when libvirtd is not running; -short
// skips it instead.
func requireLibvirtd(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a running libvirtd; skipped with -short")
	}
	if _, err := os.Stat(DefaultSocket); err != nil {
		t.Fatalf("libvirtd is not running (%v). These tests need it; CI's .ci/run installs and starts it. By hand:\n"+
			"  apt-get update && apt-get install -y --no-install-recommends libvirt-daemon libvirt-clients\n"+
			"  useradd -r -M libvirt-qemu; groupadd -f kvm; mkdir -p /var/log/libvirt /var/run/libvirt; libvirtd -d\n"+
			"or skip them with go test -short.", err)
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newTestHypervisor connects to the test driver and closes at cleanup.
func newTestHypervisor(t *testing.T) *Hypervisor {
	t.Helper()
	requireLibvirtd(t)
	h, err := New(testContext(t), Config{URI: testURI})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// uniqueName is a domain name no other test or run uses; the domain is
// destroyed and undefined at cleanup whatever the test did.
func uniqueName(t *testing.T, h *Hypervisor) string {
	t.Helper()
	base := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	name := fmt.Sprintf("gpuaas-%s-%08x", base, rand.Uint32())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Destroy(ctx, name)
		if err := h.Undefine(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
			t.Errorf("cleanup undefine %s: %v", name, err)
		}
	})
	return name
}

func minimalSpec(name string) host.DomainSpec {
	return host.DomainSpec{Name: name, VCPUs: 1, MemoryMiB: 256, NUMANode: -1}
}

func wantState(t *testing.T, h *Hypervisor, name string, want host.DomainState) {
	t.Helper()
	got, err := h.State(testContext(t), name)
	if err != nil || got != want {
		t.Fatalf("State(%s) = %q, %v; want %q, nil", name, got, err, want)
	}
}

func listed(t *testing.T, h *Hypervisor, name string) bool {
	t.Helper()
	names, err := h.List(testContext(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !slices.IsSorted(names) {
		t.Errorf("List = %v; want sorted", names)
	}
	return slices.Contains(names, name)
}

// TestLifecycle runs every golden spec, hostdevs included (the test driver
// records PCI hostdevs without touching the host), through define, boot,
// shutdown, destroy and undefine, repeating each step to check retries.
func TestLifecycle(t *testing.T) {
	for _, tc := range goldenSpecs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHypervisor(t)
			ctx := testContext(t)
			spec := tc.spec
			spec.Name = uniqueName(t, h)
			spec.UUID = ""

			wantState(t, h, spec.Name, host.DomainNotFound)
			if err := h.Define(ctx, spec); err != nil {
				t.Fatalf("Define: %v", err)
			}
			wantState(t, h, spec.Name, host.DomainShutoff)
			if !listed(t, h, spec.Name) {
				t.Fatalf("List does not name %s after Define", spec.Name)
			}

			steps := []struct {
				op   string
				do   func(context.Context, string) error
				want host.DomainState
			}{
				{"start", h.Start, host.DomainRunning},
				{"start again", h.Start, host.DomainRunning},
				{"shutdown", h.Shutdown, host.DomainShutoff},
				{"shutdown again", h.Shutdown, host.DomainShutoff},
				{"restart", h.Start, host.DomainRunning},
				{"destroy", h.Destroy, host.DomainShutoff},
				{"destroy again", h.Destroy, host.DomainShutoff},
			}
			for _, s := range steps {
				if err := s.do(ctx, spec.Name); err != nil {
					t.Fatalf("%s: %v", s.op, err)
				}
				wantState(t, h, spec.Name, s.want)
			}

			if err := h.Undefine(ctx, spec.Name); err != nil {
				t.Fatalf("Undefine: %v", err)
			}
			wantState(t, h, spec.Name, host.DomainNotFound)
			if listed(t, h, spec.Name) {
				t.Fatalf("List names %s after Undefine", spec.Name)
			}
			if err := h.Undefine(ctx, spec.Name); !errors.Is(err, host.ErrDomainNotFound) {
				t.Fatalf("Undefine again = %v; want host.ErrDomainNotFound", err)
			}
		})
	}
}

func TestDefineExisting(t *testing.T) {
	t.Parallel()
	h := newTestHypervisor(t)
	ctx := testContext(t)
	spec := minimalSpec(uniqueName(t, h))
	// With the same name and UUID libvirt itself would redefine in place.
	spec.UUID = "3e0c1f9a-7d2b-4c5e-9f8a-1b2c3d4e5f60"
	if err := h.Define(ctx, spec); err != nil {
		t.Fatalf("Define: %v", err)
	}
	for _, again := range []host.DomainSpec{spec, func() host.DomainSpec { s := spec; s.UUID = ""; s.VCPUs = 2; return s }()} {
		if err := h.Define(ctx, again); !errors.Is(err, host.ErrDomainExists) {
			t.Errorf("Define(%s, uuid %q) again = %v; want host.ErrDomainExists", again.Name, again.UUID, err)
		}
	}
	wantState(t, h, spec.Name, host.DomainShutoff)
}

// TestDefineConcurrent: of many simultaneous Defines of one name exactly
// one wins.
func TestDefineConcurrent(t *testing.T) {
	t.Parallel()
	h := newTestHypervisor(t)
	ctx := testContext(t)
	spec := minimalSpec(uniqueName(t, h))
	spec.UUID = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	var wins, exists atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := h.Define(ctx, spec); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, host.ErrDomainExists):
				exists.Add(1)
			default:
				t.Errorf("Define: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || exists.Load() != 7 {
		t.Errorf("wins, host.ErrDomainExists = %d, %d; want 1, 7", wins.Load(), exists.Load())
	}
}

func TestUnknownDomain(t *testing.T) {
	t.Parallel()
	h := newTestHypervisor(t)
	ctx := testContext(t)
	name := fmt.Sprintf("gpuaas-never-defined-%08x", rand.Uint32())
	ops := map[string]func(context.Context, string) error{
		"Start": h.Start, "Shutdown": h.Shutdown, "Destroy": h.Destroy, "Undefine": h.Undefine,
	}
	for op, do := range ops {
		if err := do(ctx, name); !errors.Is(err, host.ErrDomainNotFound) {
			t.Errorf("%s(unknown) = %v; want host.ErrDomainNotFound", op, err)
		}
	}
	wantState(t, h, name, host.DomainNotFound)
}

func TestUndefineActive(t *testing.T) {
	t.Parallel()
	h := newTestHypervisor(t)
	ctx := testContext(t)
	name := uniqueName(t, h)
	if err := h.Define(ctx, minimalSpec(name)); err != nil {
		t.Fatalf("Define: %v", err)
	}
	if err := h.Start(ctx, name); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := h.Undefine(ctx, name); !errors.Is(err, host.ErrDomainActive) {
		t.Fatalf("Undefine(running) = %v; want host.ErrDomainActive", err)
	}
	wantState(t, h, name, host.DomainRunning)
}

func TestDefineInvalidSpec(t *testing.T) {
	t.Parallel()
	h := newTestHypervisor(t)
	ctx := testContext(t)
	spec := minimalSpec(uniqueName(t, h))
	spec.HostDevs = []host.PCIAddress{"0000:18:00"}
	if err := h.Define(ctx, spec); !errors.Is(err, host.ErrInvalidSpec) {
		t.Fatalf("Define(bad pci) = %v; want host.ErrInvalidSpec", err)
	}
	wantState(t, h, spec.Name, host.DomainNotFound)
}

// TestReconnect: after libvirtd drops the connection the next call dials
// again through Config.Dial.
func TestReconnect(t *testing.T) {
	t.Parallel()
	requireLibvirtd(t)
	var mu sync.Mutex
	var conns []net.Conn
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", DefaultSocket)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	h, err := New(testContext(t), Config{URI: testURI, Dial: dial})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer h.Close()

	first := h.lv
	mu.Lock()
	conns[0].Close()
	mu.Unlock()
	select {
	case <-first.Disconnected():
	case <-testContext(t).Done():
		t.Fatal("go-libvirt did not notice the closed connection")
	}

	wantState(t, h, "gpuaas-never-defined", host.DomainNotFound)
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 2 {
		t.Errorf("dialed %d times; want 2", len(conns))
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	h := newTestHypervisor(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.State(ctx, "anything"); !errors.Is(err, context.Canceled) {
		t.Errorf("State(canceled ctx) = %v; want context.Canceled", err)
	}
	if _, err := New(ctx, Config{URI: testURI}); !errors.Is(err, context.Canceled) {
		t.Errorf("New(canceled ctx) = %v; want context.Canceled", err)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	requireLibvirtd(t)
	h, err := New(testContext(t), Config{URI: testURI})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	if _, err := h.List(testContext(t)); !errors.Is(err, host.ErrClosed) {
		t.Errorf("List after Close = %v; want host.ErrClosed", err)
	}
}

// TestNewNoSocket needs no libvirtd: it checks the error for a missing one.
func TestNewNoSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "libvirt-sock")
	_, err := New(testContext(t), Config{URI: testURI, Socket: socket})
	if err == nil || !strings.Contains(err.Error(), socket) {
		t.Fatalf("New(missing socket) = %v; want an error naming %s", err, socket)
	}
}

func TestConfigCheckAndSetDefaults(t *testing.T) {
	tests := []struct {
		name    string
		uri     string
		wantURI string
		wantErr bool
	}{
		{name: "default", uri: "", wantURI: DefaultURI},
		{name: "test driver", uri: "test:///default", wantURI: "test:///default"},
		{name: "remote host", uri: "qemu://node7/system", wantErr: true},
		{name: "transport", uri: "qemu+ssh:///system", wantErr: true},
		{name: "no scheme", uri: "/system", wantErr: true},
		{name: "unparsable", uri: "qemu:///sys%zz", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{URI: tc.uri}
			err := c.CheckAndSetDefaults()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("CheckAndSetDefaults(%q) = nil; want an error", tc.uri)
				}
				return
			}
			if err != nil || c.URI != tc.wantURI || c.Socket != DefaultSocket || c.Dial == nil || c.Now == nil || c.Log == nil {
				t.Fatalf("CheckAndSetDefaults(%q) = %v, config %+v; want nil and defaults with URI %q", tc.uri, err, c, tc.wantURI)
			}
		})
	}
}
