package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// cluster is what the harness runs: three NATS servers routed through
// proxies (proxies[i][j] carries server i's route to server j), two
// lease-mode ingest processes and two fanout processes.
type cluster struct {
	cfg     Config
	dir     string
	authKey string
	svcSeed string // the service nkey's seed file (--nats-nkey)
	natsURL []string
	nats    [3]*proc
	proxies [3][3]*proxy
	ingest  [2]*proc
	fanout  [2]*proc
	client  *http.Client

	mu  sync.Mutex
	cut int // the server cut off from its peers, or -1
}

// reservePorts returns n distinct free loopback ports, each held by a
// listener until release. Ports picked one after another with nothing held
// can repeat (a port just closed is free again), and the harness's own
// listeners (the route proxies) could take one before its process binds
// it: a route proxy then forwarded to an HTTP port.
func reservePorts(n int) (ports []int, release func(), err error) {
	lns := make([]net.Listener, 0, n)
	release = func() {
		for _, l := range lns {
			l.Close()
		}
	}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}

// writeKey writes kp as `nk -gen ... -pubout` does: the seed, then the
// public key; it returns the public key.
func writeKey(path string, kp nkeys.KeyPair) (string, error) {
	seed, err := kp.Seed()
	if err != nil {
		return "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", err
	}
	return pub, os.WriteFile(path, []byte(string(seed)+"\n"+pub+"\n"), 0o600)
}

// docsServerConfig returns the NATS server configuration of
// docs/production.md ("Locking the bus"): the block that starts with
// "# threadcast-nats.conf".
func docsServerConfig(repo string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repo, "docs", "production.md"))
	if err != nil {
		return "", fmt.Errorf("chaos: the server configuration: %w", err)
	}
	_, rest, ok := strings.Cut(string(b), "# threadcast-nats.conf\n")
	if !ok {
		return "", errors.New("chaos: docs/production.md has no block starting with # threadcast-nats.conf")
	}
	conf, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", errors.New("chaos: docs/production.md: the server configuration block does not end")
	}
	return conf, nil
}

// replacer applies replacements to the docs' configuration and fails when
// one is absent, so that a change of the docs is noticed.
type replacer struct {
	s   string
	err error
}

func (r *replacer) all(old, repl string) {
	if r.err == nil && !strings.Contains(r.s, old) {
		r.err = fmt.Errorf("chaos: docs/production.md's server configuration no longer contains %q", old)
	}
	r.s = strings.ReplaceAll(r.s, old, repl)
}

// newCluster writes the configuration of everything into dir and starts
// the proxies; start starts the processes.
func newCluster(cfg Config, dir string) (*cluster, error) {
	c := &cluster{cfg: cfg, dir: dir, cut: -1, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	kb := make([]byte, 32)
	_, _ = rand.Read(kb)
	c.authKey = hex.EncodeToString(kb)
	svcKey, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	calloutKey, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	c.svcSeed = filepath.Join(dir, "service.nk")
	calloutSeed := filepath.Join(dir, "callout.nk")
	svcPub, err := writeKey(c.svcSeed, svcKey)
	if err != nil {
		return nil, err
	}
	issuer, err := writeKey(calloutSeed, calloutKey)
	if err != nil {
		return nil, err
	}
	base, err := docsServerConfig(cfg.Repo)
	if err != nil {
		return nil, err
	}
	ports, release, err := reservePorts(3*3 + 1 + 4)
	if err != nil {
		return nil, err
	}
	defer release() // once the proxies hold their own ports
	client, route, mon := ports[0:3], ports[3:6], ports[6:9]
	// nowhere: a port nothing listens on, advertised as every server's
	// route address, so that no server learns a direct way to a peer from
	// the cluster's gossip: every route goes through the proxies.
	nowhere := ports[9]
	httpPorts := ports[10:14]
	for i := range 3 {
		for j := range 3 {
			if i == j {
				continue
			}
			if c.proxies[i][j], err = newProxy("127.0.0.1:" + strconv.Itoa(route[j])); err != nil {
				c.closeProxies()
				return nil, err
			}
		}
	}
	routePass := hex.EncodeToString(kb[:8])
	for i := range 3 {
		r := &replacer{s: base}
		r.all("server_name: n1", fmt.Sprintf("server_name: n%d", i+1))
		r.all("listen: 0.0.0.0:4222", "listen: 127.0.0.1:"+strconv.Itoa(client[i]))
		r.all("listen: 0.0.0.0:6222", "listen: 127.0.0.1:"+strconv.Itoa(route[i])+
			"\n  advertise: 127.0.0.1:"+strconv.Itoa(nowhere))
		for j := range 3 {
			addr := "127.0.0.1:" + strconv.Itoa(route[j])
			if j != i {
				addr = c.proxies[i][j].Addr()
			}
			r.all(fmt.Sprintf("@n%d:6222", j+1), "@"+addr)
		}
		r.all("<store_dir>", filepath.Join(dir, fmt.Sprintf("n%d-js", i+1)))
		r.all("<service_nkey>", svcPub)
		r.all("<callout_issuer>", issuer)
		r.all("<route_password>", routePass)
		if r.err != nil {
			c.closeProxies()
			return nil, r.err
		}
		conf := r.s + "\nhttp: 127.0.0.1:" + strconv.Itoa(mon[i]) + "\n"
		file := filepath.Join(dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			c.closeProxies()
			return nil, err
		}
		c.natsURL = append(c.natsURL, "nats://127.0.0.1:"+strconv.Itoa(client[i]))
		c.nats[i] = &proc{
			name: fmt.Sprintf("nats-%d", i+1), kind: "nats", bin: cfg.NatsServer, args: []string{"-c", file},
			logPath: filepath.Join(dir, fmt.Sprintf("nats-%d.log", i+1)),
			// /healthz: the server is up and its JetStream streams and
			// consumers are current.
			probe: fmt.Sprintf("http://127.0.0.1:%d/healthz", mon[i]),
		}
	}
	parts := strconv.Itoa(cfg.Partitions)
	for i := range 2 {
		addr := "127.0.0.1:" + strconv.Itoa(httpPorts[i])
		c.ingest[i] = &proc{
			name: fmt.Sprintf("ingest-%d", i+1), kind: "ingest", bin: filepath.Join(cfg.BinDir, "ingest"),
			args: []string{
				"--nats-url", c.urls(i), "--nats-nkey", c.svcSeed, "--nats-callout-seed", calloutSeed,
				"--auth-key", c.authKey,
				"--partition-mode", "lease", "--lease-holder", fmt.Sprintf("ingest-%d", i+1),
				"--lease-ttl", cfg.LeaseTTL.String(),
				"--partitions", parts, "--replicas", "3",
				"--drain", "5s", "--http", addr, "--log-level", "info",
			},
			logPath: filepath.Join(dir, fmt.Sprintf("ingest-%d.log", i+1)),
			probe:   "http://" + addr + "/readyz",
		}
		faddr := "127.0.0.1:" + strconv.Itoa(httpPorts[2+i])
		c.fanout[i] = &proc{
			name: fmt.Sprintf("fanout-%d", i+1), kind: "fanout", bin: filepath.Join(cfg.BinDir, "fanout"),
			args: []string{
				"--nats-url", c.urls(i + 1), "--nats-nkey", c.svcSeed, "--auth-key", c.authKey,
				"--partitions", parts, "--http", faddr, "--drain", "5s",
				"--max-conns-per-source", "0", "--log-level", "info",
			},
			logPath: filepath.Join(dir, fmt.Sprintf("fanout-%d.log", i+1)),
			probe:   "http://" + faddr + "/readyz",
		}
	}
	return c, nil
}

// urls lists the servers starting with the first (clients try them in
// order).
func (c *cluster) urls(first int) string {
	u := make([]string, 0, 3)
	for k := range 3 {
		u = append(u, c.natsURL[(first+k)%3])
	}
	return strings.Join(u, ",")
}

// fanoutURLs are the fanout base URLs, comma-separated.
func (c *cluster) fanoutURLs() string {
	var u []string
	for _, f := range c.fanout {
		u = append(u, strings.TrimSuffix(f.probe, "/readyz"))
	}
	return strings.Join(u, ",")
}

func (c *cluster) procs() []*proc {
	return []*proc{c.nats[0], c.nats[1], c.nats[2], c.ingest[0], c.ingest[1], c.fanout[0], c.fanout[1]}
}

// start starts the servers, waits for JetStream on each, then ingest one
// at a time (the first creates the stream and buckets), then the fanouts.
func (c *cluster) start(ctx context.Context, logf func(string, ...any)) error {
	for _, p := range c.nats {
		if err := p.start(); err != nil {
			return err
		}
	}
	for i := range 3 {
		if err := c.waitJetStream(ctx, i, 60*time.Second); err != nil {
			return err
		}
	}
	logf("NATS cluster up: %s", strings.Join(c.natsURL, " "))
	for _, group := range [][]*proc{{c.ingest[0]}, {c.ingest[1]}, c.fanout[:]} {
		for _, p := range group {
			if err := p.start(); err != nil {
				return err
			}
		}
		for _, p := range group {
			if err := c.waitReady(ctx, p, 90*time.Second); err != nil {
				return err
			}
			logf("%s ready", p.name)
		}
	}
	return nil
}

// waitReady waits for p's probe, restarting p if it exits while starting
// (an ingest that times out creating the replicated stream on a fresh
// cluster exits, as docs/production.md says; an orchestrator restarts it).
func (c *cluster) waitReady(ctx context.Context, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !p.ready(ctx, c.client) {
		if !p.running() {
			p.noteExit()
			if err := p.start(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s not ready after %v; log tail:\n%s", p.name, timeout, p.logTail(3000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// noteExit records an exit the harness did not cause.
func (p *proc) noteExit() {
	tail := p.logTail(2000)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, fmt.Sprintf("%s exited (%v) at %s; log tail:\n%s",
		p.name, p.waitErr, time.Now().UTC().Format(time.RFC3339), tail))
}

// connect opens a service connection (the service nkey) to the servers,
// first server first.
func (c *cluster) connect(first int, name string) (*nats.Conn, error) {
	opt, err := nats.NkeyOptionFromSeed(c.svcSeed)
	if err != nil {
		return nil, err
	}
	return nats.Connect(c.urls(first), opt, nats.Name(name), nats.MaxReconnects(-1))
}

// waitJetStream waits until server i answers a JetStream request.
func (c *cluster) waitJetStream(ctx context.Context, i int, timeout time.Duration) error {
	opt, err := nats.NkeyOptionFromSeed(c.svcSeed)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		err = func() error {
			nc, err := nats.Connect(c.natsURL[i], opt, nats.MaxReconnects(0), nats.Timeout(time.Second))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err = js.AccountInfo(actx)
			return err
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: JetStream on %s: %w; log tail:\n%s", c.natsURL[i], err, c.nats[i].logTail(3000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// isolate cuts server i off from its peers (both directions of its
// routes); heal undoes it.
func (c *cluster) isolate(i int) {
	c.mu.Lock()
	c.cut = i
	c.mu.Unlock()
	for j := range 3 {
		if j != i {
			c.proxies[i][j].Cut()
			c.proxies[j][i].Cut()
		}
	}
}

func (c *cluster) heal() {
	for i := range 3 {
		for j := range 3 {
			if i != j {
				c.proxies[i][j].Heal()
			}
		}
	}
	c.mu.Lock()
	c.cut = -1
	c.mu.Unlock()
}

func (c *cluster) closeProxies() {
	for i := range 3 {
		for j := range 3 {
			if p := c.proxies[i][j]; p != nil {
				_ = p.Close()
			}
		}
	}
}

// stop stops everything: the fanouts, the ingests (each drains), the
// servers, then the proxies; every process is waited for.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, group := range [][]*proc{c.fanout[:], c.ingest[:], c.nats[:]} {
		for _, p := range group {
			if p != nil {
				wg.Go(func() { p.terminate(15 * time.Second) })
			}
		}
		wg.Wait()
	}
	c.closeProxies()
	c.client.CloseIdleConnections()
}
