package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// LeasedIngest is the ingest service in lease mode: partitions are claimed
// with leases (Leases) instead of the static Instance/Instances split, and
// each held partition runs as its own single-partition Ingest, started when
// its lease is acquired and stopped when it is released or lost. Build it with
// NewLeasedIngest and call Run once.
//
// One Ingest per partition costs one shard goroutine and one consumer per
// held partition (the same consumers as static mode: durable names do not
// depend on the owner, so ownership moves between modes and instances).
// A partition's threads are only ever in its own shard, so nothing is lost
// by not sharing shards across partitions except some batch coalescing.
//
// Ready, Lag and Held are safe for concurrent use.
type LeasedIngest struct {
	cfg    Config
	lc     LeaseConfig
	nc     *nats.Conn
	leases *Leases

	running atomic.Bool
	started atomic.Bool // the lease loop's first pass is over
	mu      sync.Mutex
	ins     map[int]*Restarting // running partitions
}

// NewLeasedIngest validates both configs and returns a LeasedIngest using nc
// (the caller keeps ownership of nc). cfg.Instance, cfg.Instances and
// cfg.Shards are ignored: the partitions are the leased ones. lc takes
// Partitions and Domain from cfg; its Replicas are the caller's (usually
// cfg.Replicas).
func NewLeasedIngest(nc *nats.Conn, cfg Config, lc LeaseConfig) (*LeasedIngest, error) {
	lc.Partitions, lc.Domain = cfg.Partitions, cfg.Domain
	if lc.Logger == nil {
		lc.Logger = cfg.Logger
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	leases, err := NewLeases(nc, lc)
	if err != nil {
		return nil, err
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil) // shared by the partitions' Ingests
	}
	return &LeasedIngest{cfg: cfg, lc: lc, nc: nc, leases: leases, ins: map[int]*Restarting{}}, nil
}

// Held returns the partitions this instance holds, ascending.
func (li *LeasedIngest) Held() []int { return li.leases.Held() }

// Ready reports whether the lease loop has made its first pass and every
// partition whose lease it holds runs with its consumer bound (a partition
// claimed but not started yet is not). An instance holding no partition
// (more instances than partitions) is ready: it is a standby.
func (li *LeasedIngest) Ready() bool {
	if !li.started.Load() {
		return false
	}
	held := li.leases.Held()
	li.mu.Lock()
	defer li.mu.Unlock()
	for _, p := range held {
		if in := li.ins[p]; in == nil || !in.Ready() {
			return false
		}
	}
	return true
}

// Lag returns the undelivered messages summed over the held partitions.
func (li *LeasedIngest) Lag() uint64 {
	li.mu.Lock()
	defer li.mu.Unlock()
	var n uint64
	for _, in := range li.ins {
		n += in.Lag()
	}
	return n
}

// Run creates the stream and buckets, then holds leases and runs the held
// partitions until ctx ends; then every partition drains (bounded by
// min(drain, TTL/4) each, in parallel) and the leases are released. It
// returns only after every goroutine it started has returned.
func (li *LeasedIngest) Run(ctx context.Context, drain time.Duration) error {
	if !li.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	js, err := newJetStream(li.nc, li.cfg.Domain)
	if err != nil {
		return fmt.Errorf("pipeline: jetstream: %w", err)
	}
	if _, _, err := EnsureStreams(ctx, js, &li.cfg); err != nil {
		return err
	}
	pdrain := min(drain, li.lc.PartitionDrain())
	run := func(pctx context.Context, p int, epoch uint64) error {
		cfg := li.cfg
		// Instance p of P owns exactly partition p.
		cfg.Instance, cfg.Instances, cfg.Shards = p, cfg.Partitions, 1
		// A consumer per ownership: a stale owner's acks reach its own
		// (deleted) consumer, never this one.
		cfg.ConsumerEpoch = epoch
		cfg.Logger = li.cfg.Logger.With("partition", p)
		// A delivery gap restarts the partition in place, lease kept.
		in := NewRestarting(func() (Service, error) { return NewIngest(li.nc, cfg) })
		in.OnRestart = func() { li.leases.cfg.Metrics.Events.WithLabelValues(LeaseRestarted).Inc() }
		li.mu.Lock()
		li.ins[p] = in
		li.mu.Unlock()
		defer func() {
			li.mu.Lock()
			delete(li.ins, p)
			li.mu.Unlock()
		}()
		err := in.Run(pctx, pdrain)
		if errors.Is(context.Cause(pctx), ErrLeaseLost) && err == nil {
			return nil
		}
		return err
	}
	// Ready once the first lease pass is over, even when nothing is held (a
	// standby), and not before: until then the partitions it will claim
	// are not known.
	li.leases.passed = func() { li.started.Store(true) }
	return li.leases.Run(ctx, run)
}
