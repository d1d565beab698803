package node

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
)

// jetStream is the JetStream of the node's connection in Pipeline.Domain
// (empty: the connection's own).
func (n *Node) jetStream() (jetstream.JetStream, error) {
	if d := n.cfg.Pipeline.Domain; d != "" {
		return jetstream.NewWithDomain(n.nc, d)
	}
	return jetstream.New(n.nc)
}

// ensureStreams creates or updates the event stream and the checkpoint
// bucket.
func (n *Node) ensureStreams() error {
	js, err := n.jetStream()
	if err != nil {
		return fmt.Errorf("%w: jetstream: %w", ErrNats, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Drain)
	defer cancel()
	_, _, err = pipeline.EnsureStreams(ctx, js, &n.cfg.Pipeline)
	return err
}

// startIngest starts the reducers and returns the bridge (nil when
// Config.Bridge is off).
func (n *Node) startIngest() (http.Handler, error) {
	pc := n.cfg.Pipeline
	pc.Logger = n.log.With("part", "ingest")
	pc.Metrics = pipeline.NewMetrics(n.reg)
	pc.Quota = n.cfg.Quota
	lim, err := quota.New(n.cfg.Quota)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var retained *pipeline.RetainedCounter
	if n.cfg.Quota.Retained() {
		js, err := jetstream.New(n.nc)
		if err != nil {
			return nil, err
		}
		retained = pipeline.NewRetainedCounter(js, pc.Stream, n.cfg.Quota, n.cfg.Quota.RetainedEvery, pc.Logger)
		pc.Retained = retained.Check
	}
	in, err := n.newIngester(pc)
	if err != nil {
		return nil, err
	}
	n.in = in
	n.ingest.run(func(ctx context.Context) error {
		// The counter and the watch live as long as the reducers: stopped
		// and waited for when Run returns, for whatever reason.
		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); n.storage.Run(hctx) }()
		if retained != nil {
			wg.Add(1)
			go func() { defer wg.Done(); retained.Run(hctx) }()
		}
		err := in.Run(ctx, n.cfg.Drain)
		stop()
		wg.Wait()
		return err
	}, n.fail("ingest"))

	if !n.cfg.Bridge {
		return nil, nil
	}
	if n.bridge, err = agent.New(n.nc, agent.DefaultConfig()); err != nil {
		return nil, fmt.Errorf("node: bridge publisher: %w", err)
	}
	verify := func(*http.Request, string) error { return nil } // BridgeNoAuth
	if !n.cfg.BridgeNoAuth {
		verify = bridge.Verifier(n.verifier)
	}
	bc := bridge.Config{Publisher: n.bridge, Verify: verify, Quota: lim,
		MaxEventBytes: n.cfg.Pipeline.MaxEventBytes(), IdempotencyWindow: pc.Duplicates, Window: n.cfg.BridgeWindow, Storage: n.storage}
	if bc.Idempotency, err = n.idempotencyBucket(&pc); err != nil {
		return nil, err
	}
	if retained != nil {
		bc.Retained = retained.Check
	}
	b, err := bridge.New(bc)
	if err != nil {
		return nil, err
	}
	n.reg.MustRegister(b.Collectors()...) // threadcast_bridge_*, as README lists
	return b, nil
}

// idempotencyBucket creates or updates the bucket of the bridge's first
// answers (the Idempotency-Key records).
func (n *Node) idempotencyBucket(pc *pipeline.Config) (jetstream.KeyValue, error) {
	js, err := n.jetStream()
	if err != nil {
		return nil, fmt.Errorf("%w: jetstream: %w", ErrNats, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Drain)
	defer cancel()
	return bridge.EnsureIdempotencyBucket(ctx, js, pc)
}

// newIngester builds ingest in the configured partition mode.
func (n *Node) newIngester(pc pipeline.Config) (ingester, error) {
	if n.cfg.Lease {
		lc := n.cfg.LeaseConfig
		lc.Logger = pc.Logger
		lc.Metrics = pipeline.NewLeaseMetrics(n.reg)
		return pipeline.NewLeasedIngest(n.nc, pc, lc)
	}
	// A delivery gap (a NATS server or consumer leader moved) or a lost
	// consumer (a server restart forgot it) stops an Ingest; Restarting
	// replaces it in place, replaying from the ack floors. Static
	// assignment: nobody else can own these partitions. The first is
	// built here so that its errors are start-up errors; build is called
	// by Run's goroutine alone, so first needs no lock.
	first, err := pipeline.NewIngest(n.nc, pc)
	if err != nil {
		return nil, err
	}
	in := pipeline.NewRestarting(func() (pipeline.Service, error) {
		if first != nil {
			in := first
			first = nil
			return in, nil
		}
		return pipeline.NewIngest(n.nc, pc)
	})
	in.RestartOnLost = true
	return in, nil
}
