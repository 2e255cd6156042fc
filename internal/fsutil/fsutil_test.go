package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []Durability{Atomic, Synced, Durable} {
		name := filepath.Join(dir, "f")
		if err := WriteFile(name, []byte("one"), 0o600, d); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(name, []byte("two"), 0o640, d); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != "two" {
			t.Fatalf("got %q, %v; want two", got, err)
		}
		fi, _ := os.Stat(name)
		if fi.Mode().Perm() != 0o640 {
			t.Fatalf("got mode %v; want 0640", fi.Mode().Perm())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("got %d entries; want only the file (no temporary left)", len(entries))
		}
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o600, Atomic); err == nil {
		t.Fatal("got nil error writing into a missing directory; want an error")
	}
}

// BenchmarkWriteFile is the cost of one write at each durability, on a
// file the size of a hostd task record (bench/README.md, the task round
// trip: hostd writes about three per task).
func BenchmarkWriteFile(b *testing.B) {
	data := make([]byte, 600)
	for _, d := range []struct {
		name string
		d    Durability
	}{{"Atomic", Atomic}, {"Synced", Synced}, {"Durable", Durable}} {
		b.Run(d.name, func(b *testing.B) {
			name := filepath.Join(b.TempDir(), "r.json")
			for range b.N {
				if err := WriteFile(name, data, 0o600, d.d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
