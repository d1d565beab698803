package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/pipeline"
)

// embedded is Threadcast assembled in this process the way cmd/threadcast
// assembles it: an embedded NATS server with JetStream, ingest and the
// fanout's HTTP API on a loopback port. Its ingest can be stopped and
// started again (the ingest-restart scenario) while NATS and the fanout keep
// running. Close stops everything it started and waits for it.
type embedded struct {
	URL     string // fanout base URL
	NatsURL string
	Key     []byte

	log     *slog.Logger
	dir     string
	srv     *server.Server
	nc      *nats.Conn // ingest's
	fanNC   *nats.Conn // the fanout's: separate, as separate processes would have
	pc      pipeline.Config
	fanout  *fanout.Server
	stopFan context.CancelFunc
	fanDone chan error

	mu         sync.Mutex
	stopIngest context.CancelFunc
	ingestDone chan error
	ingest     *pipeline.Ingest
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
	sc := natsembed.DefaultConfig()
	sc.StoreDir = dir
	if e.srv, err = natsembed.Start(sc); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e.NatsURL = e.srv.ClientURL()
	if e.nc, err = nats.Connect(e.NatsURL, nats.Name("loadtest-threadcast"), nats.MaxReconnects(-1)); err != nil {
		e.Close()
		return nil, fmt.Errorf("loadtest: connect embedded nats: %w", err)
	}
	if e.fanNC, err = nats.Connect(e.NatsURL, nats.Name("loadtest-fanout"), nats.MaxReconnects(-1)); err != nil {
		e.Close()
		return nil, fmt.Errorf("loadtest: connect embedded nats: %w", err)
	}
	e.pc = pipeline.DefaultConfig()
	if partitions > 0 {
		e.pc.Partitions = partitions
	}
	e.pc.Logger = log
	if err := e.StartIngest(); err != nil {
		e.Close()
		return nil, err
	}
	fc := fanout.DefaultConfig()
	fc.AuthKey = e.Key
	fc.Hub.Partitions = e.pc.Partitions
	fc.Quota.Default.Streams = 0 // the load is the point
	if e.fanout, err = fanout.New(e.fanNC, fc, log); err != nil {
		e.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("loadtest: listen: %w", err)
	}
	e.URL = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	e.stopFan, e.fanDone = cancel, make(chan error, 1)
	go func() { e.fanDone <- e.fanout.Run(ctx, ln, 5*time.Second) }()
	return e, nil
}

// StartIngest starts a fresh Ingest (a new object, as a restarted process
// would have) and waits until it is ready.
func (e *embedded) StartIngest() error {
	pc := e.pc
	pc.Metrics = pipeline.NewMetrics(prometheus.NewRegistry())
	in, err := pipeline.NewIngest(e.nc, pc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, 10*time.Second) }()
	deadline := time.Now().Add(30 * time.Second)
	for !in.Ready() {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("loadtest: ingest stopped while starting: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			return errors.New("loadtest: ingest not ready after 30s")
		}
	}
	e.mu.Lock()
	e.ingest, e.stopIngest, e.ingestDone = in, cancel, done
	e.mu.Unlock()
	return nil
}

// StopIngest stops the running Ingest (a graceful drain) and waits for it.
func (e *embedded) StopIngest() error {
	e.mu.Lock()
	stop, done := e.stopIngest, e.ingestDone
	e.stopIngest, e.ingestDone, e.ingest = nil, nil, nil
	e.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
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

// Close stops the fanout, ingest and NATS, in that order, and removes the
// store.
func (e *embedded) Close() {
	if e.stopFan != nil {
		e.stopFan()
		if err := <-e.fanDone; err != nil {
			e.log.Warn("fanout stopped", "err", err)
		}
	}
	if err := e.StopIngest(); err != nil {
		e.log.Warn("ingest stopped", "err", err)
	}
	for _, nc := range []*nats.Conn{e.fanNC, e.nc} {
		if nc != nil {
			nc.Close()
		}
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
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
	cfg := node.DefaultConfig()
	cfg.HTTP, cfg.NatsListen, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "data")
	cfg.AuthKey = key
	cfg.Logger = log
	cfg.Quota.Default.Streams = 0 // the load is the point
	if partitions > 0 {
		cfg.Pipeline.Partitions = partitions
	}
	n, err := node.Start(cfg)
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
