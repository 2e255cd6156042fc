package core

import (
	"errors"
	"time"
)

// The pool's limits, counts and shutdown (linkpool.go).

// Defaults of LinkLimits.
const (
	DefaultLinkIdle           = 15 * time.Second
	DefaultLinkMaxAge         = 10 * time.Minute
	DefaultChannelsPerLink    = 256
	DefaultLinksPerAllocation = 16
)

// ErrTooManyStreams is returned by OpenPort when an allocation has
// LinksPerAllocation links, each with ChannelsPerLink streams (or in
// use by other logins).
var ErrTooManyStreams = errors.New("too many open streams to the allocation")

// LinkLimits bound the pool of links OpenPort's streams share.
type LinkLimits struct {
	// Idle is how long a link with no channels stays open. Default:
	// DefaultLinkIdle.
	Idle time.Duration
	// MaxAge caps how long a link takes new channels, below its ticket's
	// expiry. Default: DefaultLinkMaxAge.
	MaxAge time.Duration
	// ChannelsPerLink caps the streams on one link. Default:
	// DefaultChannelsPerLink.
	ChannelsPerLink int
	// LinksPerAllocation caps the links to one allocation, all logins
	// together. Default: DefaultLinksPerAllocation.
	LinksPerAllocation int
}

func (l *LinkLimits) setDefaults() {
	if l.Idle <= 0 {
		l.Idle = DefaultLinkIdle
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultLinkMaxAge
	}
	if l.ChannelsPerLink <= 0 {
		l.ChannelsPerLink = DefaultChannelsPerLink
	}
	if l.LinksPerAllocation <= 0 {
		l.LinksPerAllocation = DefaultLinksPerAllocation
	}
}

// SetLinkLimits replaces the pool's limits (zero fields: the defaults);
// links already open keep what they were opened with until they close.
func (c *Core) SetLinkLimits(l LinkLimits) {
	l.setDefaults()
	c.links.mu.Lock()
	defer c.links.mu.Unlock()
	c.links.limits = &l
}

// LinkStats are the pool's counts.
type LinkStats struct {
	// Open is the links open now; Channels, the streams on them.
	Open, Channels int
	// Dialled is how many links were ever dialled.
	Dialled int64
}

// LinkStats counts the pool's links, those to alloc only when it is not
// empty.
func (c *Core) LinkStats(alloc string) LinkStats {
	p := &c.links
	p.mu.Lock()
	defer p.mu.Unlock()
	s := LinkStats{Dialled: p.dialled.Load()}
	for k, ls := range p.byKey {
		if alloc != "" && k.alloc != alloc {
			continue
		}
		for _, pl := range ls {
			s.Open++
			s.Channels += pl.chans
		}
	}
	return s
}

// CloseLinks closes every pooled link (the streams on them end).
func (c *Core) CloseLinks() {
	p := &c.links
	p.mu.Lock()
	var all []*pooledLink
	for _, ls := range p.byKey {
		all = append(all, ls...)
	}
	for _, pl := range all {
		p.retireLocked(pl)
	}
	p.mu.Unlock()
	for _, pl := range all {
		pl.shut()
	}
}
