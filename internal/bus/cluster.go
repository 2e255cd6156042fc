package bus

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is embedded servers routed to each other, with clustered
// JetStream: `gpuaas dev --cluster` and the fault tests run it to try
// the loss of one NATS server on one machine.
type Cluster struct {
	// cfgs start each server again (Restart) on its ports and store.
	cfgs []Config
	// mu protects servers.
	mu      sync.Mutex
	servers []*Server // nil while stopped
}

// StartCluster starts n servers configured like base (each with a store
// under base.StoreDir and a name of its own, base.ServerName-i), routed
// to each other with a generated route password, and waits until
// JetStream has a leader and every server is current. base.Cluster.Name
// defaults to "gpuaas".
func StartCluster(base Config, n int) (_ *Cluster, err error) {
	if n < 1 {
		return nil, errors.New("bus: a cluster has at least one server")
	}
	if err := base.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if base.Cluster.Name == "" {
		base.Cluster.Name = "gpuaas"
	}
	if base.Cluster.Username == "" {
		base.Cluster.Username, base.Cluster.Password = "route", randomSecret()
	}
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Shutdown()
		}
	}()
	// Clustered JetStream will not start without routes, so each server
	// is given the others' route ports up front: free ports picked now
	// (the client ports are picked by the servers).
	routePorts, err := freePorts(base.Host, n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		cfg := base
		cfg.ServerName = fmt.Sprintf("%s-%d", base.ServerName, i+1)
		cfg.StoreDir = filepath.Join(base.StoreDir, cfg.ServerName)
		cfg.Cluster.Port = routePorts[i]
		cfg.Cluster.Routes = nil
		for j, p := range routePorts {
			if j != i {
				cfg.Cluster.Routes = append(cfg.Cluster.Routes, fmt.Sprintf("nats-route://%s", net.JoinHostPort(base.Host, strconv.Itoa(p))))
			}
		}
		srv, err := Start(cfg)
		if err != nil {
			return nil, fmt.Errorf("nats %s: %w", cfg.ServerName, err)
		}
		c.cfgs, c.servers = append(c.cfgs, cfg), append(c.servers, srv)
		// Pin the client port it took, so a restart takes the same one.
		if c.cfgs[i].Port, err = urlPort(srv.ClientURL()); err != nil {
			return nil, err
		}
	}
	if err := c.WaitJetStream(base.ReadyTimeout + 20*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// freePorts picks n free TCP ports on host.
func freePorts(host string, n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pick a route port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func urlPort(u string) (int, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(parsed.Port())
	if err != nil {
		return 0, fmt.Errorf("port of %s: %w", u, err)
	}
	return port, nil
}

// Len is the number of servers, running or stopped.
func (c *Cluster) Len() int { return len(c.cfgs) }

// ClientURL is every server's client URL, comma-separated, as clients are
// given it: they fail over from one to the next.
func (c *Cluster) ClientURL() string {
	urls := make([]string, len(c.cfgs))
	for i, cfg := range c.cfgs {
		urls[i] = fmt.Sprintf("nats://%s:%d", cfg.Host, cfg.Port)
	}
	return strings.Join(urls, ",")
}

// ServerURL is server i's client URL.
func (c *Cluster) ServerURL(i int) string {
	return fmt.Sprintf("nats://%s:%d", c.cfgs[i].Host, c.cfgs[i].Port)
}

// Name is server i's name.
func (c *Cluster) Name(i int) string { return c.cfgs[i].ServerName }

// Stop shuts server i down, as a crash or an upgrade does: its clients
// move to the other servers. Stopping a stopped server does nothing.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] != nil {
		c.servers[i].Shutdown()
		c.servers[i] = nil
	}
}

// Restart starts stopped server i again on its ports with its store.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] != nil {
		return fmt.Errorf("restart nats %s: it is running", c.cfgs[i].ServerName)
	}
	srv, err := Start(c.cfgs[i])
	if err != nil {
		return fmt.Errorf("restart nats %s: %w", c.cfgs[i].ServerName, err)
	}
	c.servers[i] = srv
	return nil
}

// ClientNames are the names of the client connections on server i (none
// while it is stopped), as monitoring shows them.
func (c *Cluster) ClientNames(i int) ([]string, error) {
	c.mu.Lock()
	srv := c.servers[i]
	c.mu.Unlock()
	if srv == nil {
		return nil, nil
	}
	connz, err := srv.ns.Connz(&server.ConnzOptions{Limit: 10000})
	if err != nil {
		return nil, fmt.Errorf("connections of %s: %w", c.cfgs[i].ServerName, err)
	}
	var names []string
	for _, conn := range connz.Conns {
		names = append(names, conn.Name)
	}
	return names, nil
}

// WaitJetStream waits until the running servers have a JetStream leader
// and each is current with it.
func (c *Cluster) WaitJetStream(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if c.jetStreamReady() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats cluster: no JetStream leader after %s: %w", timeout, ErrNotReady)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) jetStreamReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	leader := false
	for _, s := range c.servers {
		if s == nil {
			continue
		}
		if !s.ns.JetStreamIsCurrent() {
			return false
		}
		leader = leader || s.ns.JetStreamIsLeader()
	}
	return leader
}

// Shutdown stops every running server.
func (c *Cluster) Shutdown() {
	for i := range c.servers {
		c.Stop(i)
	}
}
