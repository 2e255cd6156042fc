package libvirt

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// TestDomainXMLSerialLog: SerialLog copies the serial console to a file
// (a relative path is refused); without it the serial element is as
// before (the golden files).
func TestDomainXMLSerialLog(t *testing.T) {
	spec := host.DomainSpec{Name: "a-1", VCPUs: 1, MemoryMiB: 256, NUMANode: -1, SerialLog: "/var/lib/gpuaas/seeds/a-1/serial.log"}
	out, err := DomainXML(spec)
	if err != nil {
		t.Fatal(err)
	}
	if want := `<serial type="pty">` + "\n" + `      <log file="/var/lib/gpuaas/seeds/a-1/serial.log" append="off"></log>`; !strings.Contains(string(out), want) {
		t.Errorf("domain XML has no %s:\n%s", want, out)
	}
	spec.SerialLog = "serial.log"
	if _, err := DomainXML(spec); !errors.Is(err, host.ErrInvalidSpec) {
		t.Errorf("DomainXML(relative serial log) = %v; want ErrInvalidSpec", err)
	}
	spec.SerialLog = ""
	if out, _ := DomainXML(spec); strings.Contains(string(out), "<log") {
		t.Errorf("domain XML without SerialLog has a log element:\n%s", out)
	}
}
