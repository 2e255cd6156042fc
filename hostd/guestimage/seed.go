package guestimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// SeedFiles are the three files of a NoCloud seed.
type SeedFiles struct {
	UserData, MetaData, NetworkConfig []byte
}

// WriteSeedISO writes files as a NoCloud seed image (ISO 9660, volume
// label "cidata") at iso, with genisoimage, or cloud-localds when that is
// what is installed. The files are staged in a directory beside iso that
// is removed again.
func WriteSeedISO(ctx context.Context, iso string, files SeedFiles) error {
	stage, err := os.MkdirTemp(filepath.Dir(iso), ".seed-")
	if err != nil {
		return fmt.Errorf("write seed: %w", err)
	}
	defer os.RemoveAll(stage)
	names := []string{"user-data", "meta-data", "network-config"}
	for i, data := range [][]byte{files.UserData, files.MetaData, files.NetworkConfig} {
		if err := os.WriteFile(filepath.Join(stage, names[i]), data, 0o600); err != nil {
			return fmt.Errorf("write seed: %w", err)
		}
	}
	in := func(name string) string { return filepath.Join(stage, name) }
	switch {
	case lookPath("genisoimage"):
		err = runTool(ctx, io.Discard, "genisoimage", "-quiet", "-output", iso, "-volid", "cidata",
			"-joliet", "-rock", in("user-data"), in("meta-data"), in("network-config"))
	case lookPath("cloud-localds"):
		err = runTool(ctx, io.Discard, "cloud-localds", "--network-config", in("network-config"),
			iso, in("user-data"), in("meta-data"))
	default:
		err = fmt.Errorf("%w: neither genisoimage nor cloud-localds is installed; apt-get install -y genisoimage", ErrMissingTool)
	}
	if err != nil {
		return fmt.Errorf("write seed: %w", err)
	}
	return nil
}

func lookPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}
