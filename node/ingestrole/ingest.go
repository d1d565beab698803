package ingestrole

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/otelexport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
)

// jetStream is the JetStream of the node's connection in Pipeline.Domain
// (empty: the connection's own).
func (s *Side) jetStream() (jetstream.JetStream, error) {
	if d := s.cfg.Pipeline.Domain; d != "" {
		return jetstream.NewWithDomain(s.h.Conn(), d)
	}
	return jetstream.New(s.h.Conn())
}

// ensureStreams creates or updates the event stream and the checkpoint
// bucket.
func (s *Side) ensureStreams() error {
	js, err := s.jetStream()
	if err != nil {
		return fmt.Errorf("%w: jetstream: %w", node.ErrNats, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.node.Drain)
	defer cancel()
	_, _, err = pipeline.EnsureStreams(ctx, js, &s.cfg.Pipeline)
	return err
}

// StartIngest creates the event stream and the checkpoint bucket, starts
// the reducers, and returns the bridge (nil when ingest or Bridge is off).
func (s *Side) StartIngest() (http.Handler, error) {
	// The stream and bucket exist before anything publishes (the demo, the
	// bridge, agents once the ports are open). A node creates them when it
	// runs ingest, or when it owns the NATS server; a node that only serves
	// or only plays the demo on an external NATS leaves them to the
	// deployment's ingest.
	if s.cfg.Ingest || s.srv != nil {
		if err := s.ensureStreams(); err != nil {
			return nil, err
		}
	}
	if !s.cfg.Ingest {
		return nil, nil
	}
	pc := s.cfg.Pipeline
	pc.Logger = s.log.With("part", "ingest")
	pc.Metrics = pipeline.NewMetrics(s.h.Registry())
	pc.Quota = s.node.Quota
	lim, err := quota.New(s.node.Quota)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", node.ErrConfig, err)
	}
	var retained *pipeline.RetainedCounter
	if s.node.Quota.Retained() {
		js, err := s.jetStream() // the event stream is in Pipeline.Domain
		if err != nil {
			return nil, fmt.Errorf("%w: jetstream: %w", node.ErrNats, err)
		}
		retained = pipeline.NewRetainedCounter(js, pc.Stream, s.node.Quota, s.node.Quota.RetainedEvery, pc.Logger)
		pc.Retained = retained.Check
	}
	if s.cfg.OTLP.Enabled {
		if s.otlp, err = otelexport.New(s.cfg.OTLP, s.h.Registry(), s.log.With("part", "otlp")); err != nil {
			return nil, fmt.Errorf("%w: %w", node.ErrConfig, err)
		}
		pc.Runs = s.otlp
	}
	in, err := s.newIngester(pc)
	if err != nil {
		return nil, err
	}
	s.in = in
	s.ingest.Run(func(ctx context.Context) error {
		// The counter and the watch live as long as the reducers: stopped
		// and waited for when Run returns, for whatever reason.
		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); s.storage.Run(hctx) }()
		if retained != nil {
			wg.Add(1)
			go func() { defer wg.Done(); retained.Run(hctx) }()
		}
		err := in.Run(ctx, s.node.Drain)
		stop()
		wg.Wait()
		return err
	}, func(err error) { s.h.Fail("ingest", err) })

	if !s.cfg.Bridge {
		return nil, nil
	}
	if s.bridge, err = agent.New(s.h.Conn(), s.publisherConfig()); err != nil {
		return nil, fmt.Errorf("node: bridge publisher: %w", err)
	}
	verify := func(*http.Request, string) error { return nil } // BridgeNoAuth
	if !s.cfg.BridgeNoAuth {
		verify = bridge.Verifier(s.h.Verifier())
	}
	bc := bridge.Config{Publisher: s.bridge, Verify: verify, Quota: lim,
		MaxEventBytes: s.cfg.Pipeline.MaxEventBytes(), IdempotencyWindow: pc.Duplicates, Window: s.cfg.BridgeWindow, Storage: s.storage}
	if bc.Idempotency, bc.IdempotencySecret, err = s.idempotency(&pc); err != nil {
		return nil, err
	}
	if retained != nil {
		bc.Retained = retained.Check
	}
	b, err := bridge.New(bc)
	if err != nil {
		return nil, err
	}
	s.h.Registry().MustRegister(b.Collectors()...) // threadcast_bridge_*, as README lists
	return b, nil
}

// publisherConfig is the configuration of the node's own publishers (the
// bridge's, the demo's). A batch is one message of the event stream, so
// it must fit the stream's max message size, which can be below both the
// default batch size and the server's max_payload (the only bound a
// Publisher learns by itself): a larger batch would be refused whole.
func (s *Side) publisherConfig() agent.Config {
	c := agent.DefaultConfig()
	c.MaxBatchBytes = min(c.MaxBatchBytes, s.cfg.Pipeline.MaxEventBytes())
	return c
}

// idempotency creates or updates the bucket of the bridge's first answers
// (the Idempotency-Key records) and reads the secret of their ids.
func (s *Side) idempotency(pc *pipeline.Config) (jetstream.KeyValue, []byte, error) {
	js, err := s.jetStream()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: jetstream: %w", node.ErrNats, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.node.Drain)
	defer cancel()
	kv, err := bridge.EnsureIdempotencyBucket(ctx, js, pc)
	if err != nil {
		return nil, nil, err
	}
	secret, err := bridge.IdempotencySecret(ctx, js, pc)
	if err != nil {
		return nil, nil, err
	}
	return kv, secret, nil
}

// newIngester builds ingest in the configured partition mode.
func (s *Side) newIngester(pc pipeline.Config) (ingester, error) {
	if s.cfg.Lease {
		lc := s.cfg.leaseConfig()
		lc.Logger = pc.Logger
		lc.Metrics = pipeline.NewLeaseMetrics(s.h.Registry())
		return pipeline.NewLeasedIngest(s.h.Conn(), pc, lc)
	}
	// A delivery gap (a NATS server or consumer leader moved) or a lost
	// consumer (a server restart forgot it) stops an Ingest; Restarting
	// replaces it in place, replaying from the ack floors. Static
	// assignment: nobody else can own these partitions. The first is
	// built here so that its errors are start-up errors; build is called
	// by Run's goroutine alone, so first needs no lock.
	first, err := pipeline.NewIngest(s.h.Conn(), pc)
	if err != nil {
		return nil, err
	}
	in := pipeline.NewRestarting(func() (pipeline.Service, error) {
		if first != nil {
			in := first
			first = nil
			return in, nil
		}
		return pipeline.NewIngest(s.h.Conn(), pc)
	})
	in.RestartOnLost = true
	return in, nil
}
