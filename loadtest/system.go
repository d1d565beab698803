package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
)

// nodeConfig is a node's config and that of its ingest side (package
// node/ingestrole), set side by side.
type nodeConfig struct {
	node.Config
	roleConfig
}

type roleConfig = ingestrole.Config

func defaultNodeConfig() nodeConfig {
	return nodeConfig{node.DefaultConfig(), ingestrole.DefaultConfig()}
}

// config is the node's Config with the ingest side plugged in.
func (c nodeConfig) config() node.Config {
	nc := c.Config
	nc.IngestRole = c.roleConfig
	return nc
}

// embedded is Threadcast as two nodes (package node) in this process: one
// runs the embedded NATS server and the fanout's HTTP API, the other
// ingest alone on the first's NATS, so that ingest can be stopped and a
// new one started (the ingest-restart scenario) while NATS and the fanout
// keep running. Close stops everything it started and waits for it.
type embedded struct {
	URL     string // fanout base URL
	NatsURL string
	Key     []byte

	log  *slog.Logger
	dir  string
	core *node.Node // NATS and the fanout
	nc   *nats.Conn // a service connection of core's, for tests that publish
	base nodeConfig

	mu     sync.Mutex
	ingest *node.Node // nil while stopped
}

// startEmbedded starts the system; partitions sets the pipeline's P.
func startEmbedded(partitions int, log *slog.Logger) (*embedded, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "threadcast-loadtest-")
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	e := &embedded{log: log, dir: dir, Key: make([]byte, 32)}
	_, _ = rand.Read(e.Key)
	cfg := defaultNodeConfig()
	cfg.HTTP, cfg.NatsListen, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "data")
	cfg.AuthKey = e.Key
	cfg.Logger = log
	cfg.Quota.Default.Streams = 0 // the load is the point
	// Every simulated subscriber connects from this one loopback address:
	// the cap per source would refuse all but a quarter of MaxConns.
	cfg.MaxConnsPerSource = 0
	cfg.Drain = 10 * time.Second
	if partitions > 0 {
		cfg.Pipeline.Partitions = partitions
	}
	core := cfg
	core.Ingest, core.Bridge, core.Dashboard = false, false, false
	if e.core, err = node.Start(core.config()); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e.URL, e.NatsURL = e.core.URL(), e.core.NatsURL()
	if e.nc, err = e.core.Connect("loadtest-threadcast", nats.MaxReconnects(-1)); err != nil {
		e.Close()
		return nil, fmt.Errorf("loadtest: connect embedded nats: %w", err)
	}
	// The ingest node: on core's server with core's identity, its own
	// HTTP port for /readyz, no bridge (agents publish on NATS).
	e.base = cfg
	e.base.Name = "threadcast-ingest"
	e.base.NatsURL, e.base.NatsIdentity, e.base.DataDir = e.NatsURL, e.core.ServiceIdentity(), ""
	e.base.Fanout, e.base.Bridge, e.base.Dashboard = false, false, false
	if err := e.StartIngest(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// StartIngest starts a fresh ingest node (new objects, as a restarted
// process would have) and waits until its /readyz answers 200.
func (e *embedded) StartIngest() error {
	n, err := node.Start(e.base.config())
	if err != nil {
		return err
	}
	if err := waitReady(n, 30*time.Second); err != nil {
		_ = n.Stop()
		return err
	}
	e.mu.Lock()
	e.ingest = n
	e.mu.Unlock()
	return nil
}

// waitReady polls n's /readyz until it answers 200, n fails, or timeout.
func waitReady(n *node.Node, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		if resp, err := client.Get(n.URL() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-n.Failed():
			return fmt.Errorf("loadtest: ingest stopped while starting: %w", n.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadtest: ingest not ready after %v", timeout)
		}
	}
}

// StopIngest stops the running ingest node (a graceful drain) and waits
// for it.
func (e *embedded) StopIngest() error {
	e.mu.Lock()
	n := e.ingest
	e.ingest = nil
	e.mu.Unlock()
	if n == nil {
		return nil
	}
	if err := n.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// RestartIngest stops ingest, waits pause, and starts a new one.
func (e *embedded) RestartIngest(pause time.Duration) error {
	if err := e.StopIngest(); err != nil {
		return fmt.Errorf("loadtest: stop ingest: %w", err)
	}
	time.Sleep(pause)
	return e.StartIngest()
}

// Node returns the node whose NATS and fanout the system uses.
func (e *embedded) Node() *node.Node { return e.core }

// Close stops ingest, then the fanout and NATS, and removes the store.
// The fanout's streams end before NATS stops; ingest goes first so that
// its drain still has the server.
func (e *embedded) Close() {
	if err := e.StopIngest(); err != nil {
		e.log.Warn("ingest stopped", "err", err)
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.core != nil {
		if err := e.core.Stop(); err != nil {
			e.log.Warn("node stopped", "err", err)
		}
	}
	_ = os.RemoveAll(e.dir)
}

// nodeSystem is the product's own assembly (package node, what
// `threadcast serve` runs) on loopback ports and a temporary data directory.
type nodeSystem struct {
	n   *node.Node
	dir string
	log *slog.Logger
}

func startNode(partitions int, log *slog.Logger) (*nodeSystem, []byte, error) {
	dir, err := os.MkdirTemp("", "threadcast-loadtest-node-")
	if err != nil {
		return nil, nil, fmt.Errorf("loadtest: %w", err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg := defaultNodeConfig()
	cfg.HTTP, cfg.NatsListen, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "data")
	cfg.AuthKey = key
	cfg.Logger = log
	cfg.Quota.Default.Streams = 0 // the load is the point
	// Every simulated subscriber connects from this one loopback address:
	// the cap per source would refuse all but a quarter of MaxConns.
	cfg.MaxConnsPerSource = 0
	if partitions > 0 {
		cfg.Pipeline.Partitions = partitions
	}
	n, err := node.Start(cfg.config())
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return &nodeSystem{n: n, dir: dir, log: log}, key, nil
}

func (s *nodeSystem) Close() {
	if err := s.n.Stop(); err != nil {
		s.log.Warn("node stopped", "err", err)
	}
	_ = os.RemoveAll(s.dir)
}
