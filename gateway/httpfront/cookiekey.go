package httpfront

import (
	"bytes"
	"fmt"
	"os"
)

// MinCookieKeyLen is the shortest cookie signing key accepted (HMAC-SHA256
// keys as long as its output, RFC 2104 section 3).
const MinCookieKeyLen = 32

// minCookieKeyDistinct is how many different byte values a key must
// hold: "aaaa…" or a word repeated is long and still guessable. Random
// bytes, base64 and hex of 32 random bytes all pass it.
const minCookieKeyDistinct = 12

// LoadCookieKey reads the front's cookie signing key from path, a file
// only its owner may read or write (0600 or 0400): replicas given the same
// file accept each other's cookies. Its content, less surrounding white
// space, is the key, e.g. from `openssl rand -base64 48`.
func LoadCookieKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cookie key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: cookie key %s is mode %04o; want 0600 (readable by its owner only)", ErrConfig, path, perm)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cookie key: %w", err)
	}
	key := bytes.TrimSpace(raw)
	if err := checkCookieKey(key); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return key, nil
}

// checkCookieKey refuses a short or visibly weak key.
func checkCookieKey(key []byte) error {
	if len(key) < MinCookieKeyLen {
		return fmt.Errorf("%w: cookie key is %d bytes; want at least %d (e.g. `openssl rand -base64 48`)", ErrConfig, len(key), MinCookieKeyLen)
	}
	var seen [256]bool
	distinct := 0
	for _, b := range key {
		if !seen[b] {
			seen[b], distinct = true, distinct+1
		}
	}
	if distinct < minCookieKeyDistinct {
		return fmt.Errorf("%w: cookie key has only %d different bytes; want a random key (e.g. `openssl rand -base64 48`)", ErrConfig, distinct)
	}
	return nil
}
