package topology

import "testing"

func TestNamespaceName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"nvme0n1", "nvme0n1"},
		{"nvme12n3", "nvme12n3"},
		{"nvme0c1n1", "nvme0n1"}, // multipath: the block device is the subsystem's
		{"nvme0n1p1", ""},
		{"model", ""},
		{"device", ""},
	}
	for _, tt := range tests {
		if got := namespaceName(tt.name); got != tt.want {
			t.Errorf("namespaceName(%q) = %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestPickByID(t *testing.T) {
	const want = "nvme-SAMSUNG_X_S1"
	tests := []struct {
		name  string
		links []string
		want  string
	}{
		{"udev name", []string{"nvme-eui.0025", "nvme-SAMSUNG_X_S1_1", want}, "/dev/disk/by-id/" + want},
		{"only the nsid form", []string{"nvme-eui.0025", "nvme-SAMSUNG_X_S1_2"}, "/dev/disk/by-id/nvme-SAMSUNG_X_S1_2"},
		{"only EUI", []string{"nvme-eui.0025"}, "/dev/disk/by-id/nvme-eui.0025"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		if got := pickByID(tt.links, want); got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}
