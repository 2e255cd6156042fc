package api

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// EventExposure tells a project's members one of its exposures (an
// allocation's port served over HTTPS, docs/expose.md) was created or
// ended; the Data is an Exposure.
const EventExposure = "expose.changed"

// Share levels of an exposure: who may open its URL.
const (
	ShareMe      = "me"      // its creator only
	ShareProject = "project" // owners and members of its project
	SharePublic  = "public"  // anyone, until it expires
)

// Bounds of an exposure: the ports a renter may expose (unprivileged
// ones) and how long an exposure lives.
const (
	MinExposePort    = 1024
	MaxExposePort    = 65535
	DefaultExposeTTL = 2 * time.Hour
	MinExposeTTL     = 10 * time.Second
	MaxExposeTTL     = 30 * 24 * time.Hour
)

// Exposure is a port of an allocation served over HTTPS by the gateway's
// front at https://<Host>.<apps domain>.
type Exposure struct {
	ID           string `json:"id"`
	ProjectID    string `json:"project_id"`
	AllocationID string `json:"allocation_id"`
	Port         int    `json:"port"`
	Share        string `json:"share"`
	Name         string `json:"name,omitempty"`
	// Host is the first label of the exposure's host name:
	// "<port>-<allocation>".
	Host string `json:"host"`
	// URL is where it is served, when controld knows its apps domain.
	URL       string     `json:"url,omitempty"`
	ExpiresAt time.Time  `json:"expires_at"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	RemovedAt *time.Time `json:"removed_at,omitempty"`
	// Ended says why a removed exposure ended: "removed", "released",
	// "expired".
	Ended string `json:"ended,omitempty"`
}

// ExposureHost is the first label of the host name of port of allocation.
func ExposureHost(allocation string, port int) string {
	return strconv.Itoa(port) + "-" + allocation
}

// ParseExposureHost splits an exposure's host name's first label into the
// allocation and the port; ok is false for a name that is not one.
func ParseExposureHost(label string) (allocation string, port int, ok bool) {
	p, alloc, found := strings.Cut(label, "-")
	if !found || alloc == "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(p)
	if err != nil || strconv.Itoa(n) != p || n < MinExposePort || n > MaxExposePort {
		return "", 0, false
	}
	return alloc, n, true
}

// ExposeCreateRequest asks to serve Port of Allocation over HTTPS to
// Share, for TTL ("2h", "30m", "7d"; DefaultExposeTTL when empty).
// Allocation may name a workload (w-…) instead: the port of its
// allocation, where its containers listen, while it has not ended.
type ExposeCreateRequest struct {
	Allocation string `json:"allocation"`
	Port       int    `json:"port"`
	Share      string `json:"share,omitempty"`
	TTL        string `json:"ttl,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ExposeListRequest lists the live exposures of Project (else the
// request's project), or of Allocation alone.
type ExposeListRequest struct {
	Project    string `json:"project,omitempty"`
	Allocation string `json:"allocation,omitempty"`
}

// ExposureList is expose.list's reply.
type ExposureList struct {
	Exposures []Exposure `json:"exposures"`
}

// ExposeRemoveRequest names an exposure by id, or by name in Project
// (else the request's project).
type ExposeRemoveRequest struct {
	Exposure string `json:"exposure"`
	Project  string `json:"project,omitempty"`
}

// CheckExposeShare checks a share level; "" is ShareMe.
func CheckExposeShare(share string) (string, error) {
	switch share {
	case "":
		return ShareMe, nil
	case ShareMe, ShareProject, SharePublic:
		return share, nil
	}
	return "", Errorf(CodeInvalidArgument, "share %q is not one of me, project, public", share).
		WithHint("--share me (you), project (its members) or public (anyone with the URL)")
}

// CheckExposePort checks a port is one a renter may expose.
func CheckExposePort(port int) error {
	if port < MinExposePort || port > MaxExposePort {
		return Errorf(CodeInvalidArgument, "port %d is outside %d–%d", port, MinExposePort, MaxExposePort).
			WithHint("serve on an unprivileged port (1024–65535) in the allocation")
	}
	return nil
}

var exposeNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// CheckExposeName checks an exposure's optional name: 1–40 lower-case
// letters, digits and dashes, starting with a letter or digit.
func CheckExposeName(name string) error {
	if name != "" && !exposeNameRE.MatchString(name) {
		return Errorf(CodeInvalidArgument, "name %q is not a valid exposure name", name).
			WithHint("use 1–40 lower-case letters, digits and '-', starting with a letter or digit")
	}
	return nil
}

// ParseExposeTTL reads an exposure's life: a Go duration ("2h", "10s") or
// a number of days ("7d"), within [MinExposeTTL, MaxExposeTTL];
// DefaultExposeTTL when empty.
func ParseExposeTTL(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultExposeTTL, nil
	}
	bad := func(why string) error {
		return Errorf(CodeInvalidArgument, "ttl %q: %s", s, why).
			WithHint(fmt.Sprintf("give a duration between %s and %dd, such as 2h or 7d", MinExposeTTL, int(MaxExposeTTL/(24*time.Hour))))
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, bad("not a number of days")
		}
		n = max(-1, min(n, int(MaxExposeTTL/(24*time.Hour))+1))
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad("not a duration")
		}
	}
	switch {
	case d <= 0:
		return 0, bad("an exposure must live for some time")
	case d < MinExposeTTL:
		return 0, bad("shorter than " + MinExposeTTL.String())
	case d > MaxExposeTTL:
		return 0, bad("longer than the most an exposure may live")
	}
	return d, nil
}
