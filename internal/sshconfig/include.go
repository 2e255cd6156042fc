package sshconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/internal/sshkeys"
)

// UserConfigEnv names the OpenSSH user config for someone who runs ssh
// with -F FILE (a test or a sandbox with a home of its own): --write edits
// that file instead.
const UserConfigEnv = "GPUAAS_SSH_USER_CONFIG"

// UserConfigPath is the OpenSSH user config that ssh reads: ~/.ssh/config
// where ~ is the home directory the password database gives the user
// (OpenSSH takes it from getpwuid, not from $HOME, which sudo or a script
// may have changed). Without an entry there, $HOME stands in;
// $GPUAAS_SSH_USER_CONFIG overrides both.
func UserConfigPath() (string, error) {
	if p := os.Getenv(UserConfigEnv); p != "" {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("%s=%s: want an absolute path", UserConfigEnv, p)
		}
		return p, nil
	}
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil && u.HomeDir != "" {
		return filepath.Join(u.HomeDir, ".ssh", "config"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find ~/.ssh/config: %w", err)
	}
	return filepath.Join(home, ".ssh", "config"), nil
}

// AddInclude puts includeLine at the top of the OpenSSH user config at
// path, where an Include applies to every host, unless an Include line
// there already names target. It reports whether it changed the file. A
// symlinked config (dotfile managers) is edited where it points; a new one
// is created 0600 in a 0700 directory.
func AddInclude(path, includeLine, target string) (bool, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	old, err := os.ReadFile(path)
	mode := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return false, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
	case err != nil:
		return false, fmt.Errorf("read %s: %w", path, err)
	default:
		if includes(old, target) {
			return false, nil
		}
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	var b bytes.Buffer
	b.WriteString("# Added by `gpuaas ssh-config --write`.\n")
	b.WriteString(includeLine + "\n")
	if len(old) > 0 {
		b.WriteByte('\n')
		b.Write(old)
	}
	if err := sshkeys.WriteFile(path, b.Bytes(), mode); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// includes reports whether an Include line of config names target.
func includes(config []byte, target string) bool {
	sc := bufio.NewScanner(bytes.NewReader(config))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		const keyword = "include"
		if len(line) <= len(keyword) || !strings.EqualFold(line[:len(keyword)], keyword) ||
			!strings.ContainsRune(" \t=", rune(line[len(keyword)])) {
			continue
		}
		rest := strings.TrimSpace(strings.TrimLeft(line[len(keyword):], " \t="))
		if strings.Trim(rest, `"`) == target { // one path, maybe quoted with spaces
			return true
		}
		for _, arg := range strings.Fields(rest) {
			if strings.Trim(arg, `"`) == target {
				return true
			}
		}
	}
	return false
}
