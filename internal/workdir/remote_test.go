package workdir

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// receive runs RemoteScript with real sh, tar and sha256sum in home,
// the stream on its input, and returns its exit code and stderr.
func receive(t *testing.T, home, name string, stream []byte) (int, string) {
	t.Helper()
	script, err := RemoteScript(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = bytes.NewReader(stream)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// stream scans root and returns its tar stream and upload name.
func stream(t *testing.T, root string) ([]byte, string) {
	t.Helper()
	p, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTar(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), UploadName("key-1", m)
}

func workdirFixture(t *testing.T) string {
	root := t.TempDir()
	mkfiles(t, root, map[string]string{
		".gitignore":    "*.bin\n",
		"ignored.bin":   "not sent",
		"train.py":      strings.Repeat("MARKER-train ", 1000),
		"data/part-000": "rows\n",
		"empty/.keep":   "",
	})
	if err := os.Chmod(filepath.Join(root, "train.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "passwd")); err != nil {
		t.Fatal(err)
	}
	return root
}

// leftovers lists what is under home's workdirs.
func leftovers(t *testing.T, home string) []string {
	ents, err := os.ReadDir(filepath.Join(home, filepath.FromSlash(Dir)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestRemoteScriptUnpacksAndChecks(t *testing.T) {
	root := workdirFixture(t)
	s, name := stream(t, root)
	home := t.TempDir()
	if code, stderr := receive(t, home, name, s); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dst := filepath.Join(home, filepath.FromSlash(NodePath(name)))
	got, err := os.ReadFile(filepath.Join(dst, "train.py"))
	if err != nil || string(got) != strings.Repeat("MARKER-train ", 1000) {
		t.Errorf("train.py: %v, %d bytes; want its content", err, len(got))
	}
	if fi, err := os.Stat(filepath.Join(dst, "train.py")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("train.py mode: %v %v; want it executable as sent", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "passwd")); err != nil || target != "/etc/passwd" {
		t.Errorf("passwd: %q %v; want a link to /etc/passwd, not a copy", target, err)
	}
	for _, absent := range []string{"ignored.bin", ManifestName, "check.out"} {
		if _, err := os.Lstat(filepath.Join(dst, absent)); err == nil {
			t.Errorf("%s is in the workdir; want it absent", absent)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "empty")); err != nil {
		t.Errorf("empty dir: %v", err)
	}
	if got := leftovers(t, home); len(got) != 1 || got[0] != name {
		t.Errorf("workdirs holds %q; want only %s", got, name)
	}
	// Sent again (a retried run): the one there is kept.
	marker := filepath.Join(dst, "written-by-the-job")
	mkfiles(t, dst, map[string]string{"written-by-the-job": "x"})
	if code, stderr := receive(t, home, name, s); code != 0 || !strings.Contains(stderr, "there already") {
		t.Fatalf("again: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the upload there was replaced: %v", err)
	}
}

func TestRemoteScriptRefusesACutOrDamagedStream(t *testing.T) {
	root := workdirFixture(t)
	s, name := stream(t, root)
	i := bytes.Index(s, []byte("MARKER-train"))
	if i < 0 {
		t.Fatal("no file content in the stream")
	}
	damaged := bytes.Clone(s)
	damaged[i] ^= 0x20
	tests := []struct {
		name   string
		stream []byte
		codes  []int
		want   string
	}{
		{"cut in a file", s[:i+100], []int{ExitTarFailed}, "upload incomplete"},
		{"cut before the manifest", s[:len(s)-2048], []int{ExitTarFailed, ExitNoManifest}, "upload incomplete"},
		{"a byte changed", damaged, []int{ExitBadSum}, "w/train.py: FAILED"},
		{"empty", nil, []int{ExitTarFailed, ExitNoManifest}, "upload incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			code, stderr := receive(t, home, name, tt.stream)
			ok := false
			for _, c := range tt.codes {
				ok = ok || c == code
			}
			if !ok || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d %q; want one of %v naming %q", code, stderr, tt.codes, tt.want)
			}
			if got := leftovers(t, home); len(got) != 0 {
				t.Errorf("left %q behind; want nothing", got)
			}
		})
	}
}

func TestRemoteScriptRefusesABadName(t *testing.T) {
	for _, name := range []string{"", "../x", "w-123", "w-0123456789abcdef0123; rm -rf ~"} {
		if _, err := RemoteScript(name); err == nil {
			t.Errorf("RemoteScript(%q) accepted", name)
		}
	}
}

func TestRemoteScriptSaysWhyItCannotUnpack(t *testing.T) {
	s, name := stream(t, workdirFixture(t))
	home := t.TempDir()
	mkfiles(t, home, map[string]string{".gpuaas/workdirs": "a file where the directory goes"})
	if code, stderr := receive(t, home, name, s); code != ExitUnpackSetup || !strings.Contains(stderr, "gpuaas: cannot make the upload's directory") {
		t.Errorf("exit %d %q; want %d saying it cannot make the directory", code, stderr, ExitUnpackSetup)
	}
}
