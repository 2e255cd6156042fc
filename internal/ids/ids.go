// Package ids makes the short, random, prefixed identifiers used across
// gpuaas ("a-7k2m9x4q1c"). They are safe as SSH user names and in NATS
// subject tokens: lower-case letters and digits after the prefix.
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var enc = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// Prefixes of the kinds of id.
const (
	User       = "u"
	Session    = "s"
	Project    = "p"
	Node       = "n"
	Slot       = "sl"
	Allocation = "a"
	Task       = "t"
	// Workload is a workload's (controld/workloads.IDPrefix).
	Workload = "w"
)

// New returns prefix-<12 random base32 characters> (60 bits).
func New(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return prefix + "-" + enc.EncodeToString(b[:])[:12]
}

// Valid reports whether s looks like an id with the given prefix.
func Valid(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"-")
	if !ok || len(rest) != 12 {
		return false
	}
	for _, r := range rest {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", r) {
			return false
		}
	}
	return true
}

// Shaped reports whether s has the shape of an id of any kind, known
// prefixes and ones yet to come: 1-5 lower-case letters, '-', then 12 id
// characters ("w-7k2m9x4q1c", "img-7k2m9x4q1c"). A name shaped so is
// refused where a command takes a name or an id (docs/apps.md, "Names").
func Shaped(s string) bool {
	prefix, _, ok := strings.Cut(s, "-")
	if !ok || len(prefix) == 0 || len(prefix) > 5 || strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyz") != "" {
		return false
	}
	return Valid(prefix, s)
}
