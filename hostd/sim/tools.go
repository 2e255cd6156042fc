package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// sandboxProfile is the ~/.profile of a sandbox user (a system user's
// comes from /etc/skel, which on Debian does the same): a login shell
// puts ~/.local/bin on PATH.
const sandboxProfile = `# gpuaas sim: ~/.local/bin holds the machine's tools (nvidia-smi).
if [ -d "$HOME/.local/bin" ]; then PATH="$HOME/.local/bin:$PATH"; fi
`

// installTools links the host's tools (its nvidia-smi) into the new
// user's ~/.local/bin, as a driver package puts nvidia-smi on a real
// node's PATH: a renter's login shell finds it. The directories are the
// user's, as if they had made them.
func (u *Users) installTools(ctx context.Context, name string) error {
	if u.hostTools == "" {
		return nil
	}
	home := u.Home(name)
	uid, gid := -1, -1
	if u.sys != nil {
		a, err := u.Accounts().Lookup(ctx, name)
		if err != nil {
			return fmt.Errorf("tools of %s: %w", name, err)
		}
		if a.Credential != nil {
			uid, gid = int(a.Credential.Uid), int(a.Credential.Gid)
		}
	} else if err := writeIfAbsent(filepath.Join(home, ".profile"), sandboxProfile); err != nil {
		return fmt.Errorf("tools of %s: %w", name, err)
	}
	for _, d := range []string{filepath.Join(home, ".local"), filepath.Join(home, ".local", "bin")} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("tools of %s: %w", name, err)
		}
		if uid >= 0 {
			if err := os.Lchown(d, uid, gid); err != nil {
				return fmt.Errorf("tools of %s: %w", name, err)
			}
		}
	}
	link := filepath.Join(home, ".local", "bin", "nvidia-smi")
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join(u.hostTools, "nvidia-smi"), link); err != nil {
		return fmt.Errorf("tools of %s: %w", name, err)
	}
	if uid >= 0 {
		if err := os.Lchown(link, uid, gid); err != nil {
			return fmt.Errorf("tools of %s: %w", name, err)
		}
	}
	return nil
}

func writeIfAbsent(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
