package pipeline

// NOTE: structure of this file. Leases is the dynamic partition ownership:
// one goroutine (Run's loop) owns every lease this instance holds
// and every partition goroutine it started; partition goroutines only report
// their end on a channel. LeasedIngest (lease_ingest.go) runs one Ingest per
// held partition on top of it.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// DefaultLeaseKV is the KV bucket holding partition leases and instance
// membership.
const DefaultLeaseKV = "THREADCAST_LEASES"

// LeaseConfig configures dynamic partition ownership.
type LeaseConfig struct {
	// Bucket is the lease bucket; its keys are p.<partition> (value: the
	// holder) and m.<holder> (membership, value: unused).
	Bucket string
	// TTL is the lease time: the bucket's max age, so a key not renewed for
	// TTL is removed by the server. A crashed holder's partitions are free
	// after at most TTL and taken within TTL + one renewal interval (TTL/5).
	TTL time.Duration
	// Holder names this instance; unique among live instances (a pod name).
	Holder string
	// Partitions is P, the same as the pipeline's.
	Partitions int
	// Replicas of the lease bucket; Domain its JetStream domain ("" = the
	// connection's own).
	Replicas int
	Domain   string
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives lease counters; nil means no metrics.
	Metrics *LeaseMetrics
}

// DefaultLeaseConfig returns the defaults; Holder is left for the caller.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{Bucket: DefaultLeaseKV, TTL: 10 * time.Second, Partitions: wire.DefaultParts, Replicas: 1}
}

// Validate checks the config for values leases cannot work with.
func (c *LeaseConfig) Validate() error {
	switch {
	case c.Bucket == "":
		return fmt.Errorf("%w: lease bucket name is required", ErrConfig)
	case c.TTL < time.Second:
		// The timing argument below needs TTL/2 of renewal slack and TTL/4
		// of drain to mean something on a loaded machine.
		return fmt.Errorf("%w: lease ttl %v < 1s", ErrConfig, c.TTL)
	case c.Holder == "" || !tokenSafe(c.Holder):
		return fmt.Errorf("%w: lease holder %q must be a non-empty subject token", ErrConfig, c.Holder)
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return fmt.Errorf("%w: partitions %d not in [1, 65536]", ErrConfig, c.Partitions)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: lease replicas %d not in [1, 5]", ErrConfig, c.Replicas)
	}
	return nil
}

// renewEvery is the loop's period: leases are renewed, membership refreshed
// and free partitions claimed this often.
func (c *LeaseConfig) renewEvery() time.Duration { return c.TTL / 5 }

// lostAfter is how long renewals may fail before a held partition is
// stopped. Timing argument (no clocks are compared across machines): a
// renewal that succeeded was written by the server no earlier than it was
// sent at t, so the key lives at least until t + TTL and no other instance
// can create it before then. We stop the partition at t + TTL/2 (a timer of
// its own, held.deadline: the loop's requests, each bounded by TTL/5, may
// keep the loop busy for longer than that while the servers do not answer)
// and give its drain at most TTL/4 (PartitionDrain), so it has stopped by
// t + 3·TTL/4.
// The fence (fencedStore: checkpoint writes carry the revision they expect)
// covers what timing cannot: a paused process, a slow drain.
func (c *LeaseConfig) lostAfter() time.Duration { return c.TTL / 2 }

// PartitionDrain bounds the drain of a partition run under a lease.
func (c *LeaseConfig) PartitionDrain() time.Duration { return c.TTL / 4 }

// PartitionFunc runs partition p until ctx ends and must return within
// LeaseConfig.PartitionDrain after that. epoch is the lease's revision when
// it was acquired: unique to this ownership of p (LeasedIngest names the
// partition's consumer with it). An error return (before ctx ended)
// gives the lease back: the partition restarts, here or elsewhere, from its
// checkpoints.
type PartitionFunc func(ctx context.Context, p int, epoch uint64) error

// Leases claims, renews, balances and hands over partition leases. Build it
// with NewLeases and call Run once; Held may be called from any goroutine.
type Leases struct {
	cfg LeaseConfig
	nc  *nats.Conn
	log *slog.Logger

	mu   sync.Mutex
	held []int // for Held; the loop's own state is in leaseState

	// passed, when set before Run, is called on Run's goroutine once its
	// first pass (renew, claim up to the fair share) is over.
	passed func()
}

// NewLeases validates cfg and returns Leases that will use nc (the caller
// keeps ownership of nc).
func NewLeases(nc *nats.Conn, cfg LeaseConfig) (*Leases, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewLeaseMetrics(nil)
	}
	return &Leases{cfg: cfg, nc: nc, log: cfg.Logger.With("holder", cfg.Holder)}, nil
}

// Held returns the partitions whose leases this instance holds, ascending.
func (l *Leases) Held() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.held)
}

// LeaseKVConfig returns the lease bucket's configuration.
func LeaseKVConfig(cfg *LeaseConfig) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "Threadcast partition leases and ingest membership",
		History:     1,
		TTL:         cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// held is one lease this instance holds.
type held struct {
	rev     uint64
	renewed time.Time // when the last successful write of the lease was SENT
	cancel  context.CancelFunc
	// deadline cancels the partition lostAfter after renewed, whatever the
	// loop is doing; each renewal moves it.
	deadline  *time.Timer
	stopping  bool // cancelled: releasing (lost == false) or lost
	lost      bool
	startedAt time.Time
}

type partDone struct {
	p   int
	err error
}

func leaseKey(p int) string       { return "p." + strconv.Itoa(p) }
func memberKey(who string) string { return "m." + who }

// ErrLeaseLost is the cause of a partition context cancelled because its
// lease was lost (not renewed in time, or taken).
var ErrLeaseLost = errors.New("pipeline: partition lease lost")

// Run keeps leases until ctx ends: every TTL/5 it renews its leases and
// membership, stops partitions whose lease it could not renew, claims free
// partitions up to its fair share ⌈P / live instances⌉, and releases
// partitions above it (gracefully: the partition drains, then the lease is
// deleted, so the next owner starts at once). When ctx ends it stops every
// partition, waits for them, and deletes its leases. It returns only after
// every goroutine it started has returned.
func (l *Leases) Run(ctx context.Context, run PartitionFunc) error {
	js, err := newJetStream(l.nc, l.cfg.Domain)
	if err != nil {
		return fmt.Errorf("pipeline: jetstream: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, LeaseKVConfig(&l.cfg))
	if err != nil {
		return fmt.Errorf("pipeline: lease bucket %s: %w", l.cfg.Bucket, err)
	}
	st := &leaseState{l: l, kv: kv, run: run, parts: map[int]*held{},
		done: make(chan partDone, l.cfg.Partitions), cooldown: map[int]time.Time{}}
	tick := time.NewTicker(l.cfg.renewEvery())
	defer tick.Stop()
	st.step(false)
	if l.passed != nil {
		l.passed()
	}
	for {
		select {
		case <-ctx.Done():
			st.shutdown(tick.C)
			return nil
		case d := <-st.done:
			st.ended(d)
		case <-tick.C:
			st.step(false)
		}
	}
}

// leaseState is owned by Run's goroutine.
type leaseState struct {
	l        *Leases
	kv       jetstream.KeyValue
	run      PartitionFunc
	parts    map[int]*held
	wg       sync.WaitGroup
	done     chan partDone
	cooldown map[int]time.Time // partitions not to reclaim before then (their run failed)
}

func (st *leaseState) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), st.l.cfg.renewEvery())
}

// step is one period of the loop. closing: renew only (shutdown).
func (st *leaseState) step(closing bool) {
	cfg := &st.l.cfg
	st.renew()
	if closing {
		return
	}
	ctx, cancel := st.opCtx()
	_, err := st.kv.Put(ctx, memberKey(cfg.Holder), nil)
	cancel()
	if err != nil {
		st.l.log.Warn("lease membership not refreshed", "err", err)
		return // without a view of the bucket, only renew
	}
	owners, members, err := st.snapshot()
	if err != nil {
		st.l.log.Warn("lease listing failed", "err", err)
		return
	}
	members[cfg.Holder] = struct{}{}
	fair := (cfg.Partitions + len(members) - 1) / len(members)
	active := 0
	for _, h := range st.parts {
		if !h.stopping {
			active++
		}
	}
	// Above the fair share: hand the excess over (newest first: the
	// oldest have the warmest state).
	if excess := active - fair; excess > 0 {
		ps := st.activeByAge()
		for _, p := range ps[len(ps)-excess:] {
			st.l.log.Info("releasing partition to rebalance", "partition", p, "fair", fair, "members", len(members))
			st.stop(p, false)
		}
		return
	}
	// Below it: claim free partitions, from an offset derived from the
	// holder so that instances starting together try different ones first.
	now := time.Now()
	start := int(hashString(cfg.Holder) % uint32(cfg.Partitions))
	for i := 0; i < cfg.Partitions && active < fair; i++ {
		p := (start + i) % cfg.Partitions
		if _, mine := st.parts[p]; mine || owners[p] != "" || now.Before(st.cooldown[p]) {
			continue
		}
		if st.claim(p) {
			active++
		}
	}
}

// renew rewrites every held lease with its revision.
func (st *leaseState) renew() {
	cfg := &st.l.cfg
	for p, h := range st.parts {
		if h.lost {
			continue
		}
		ctx, cancel := st.opCtx()
		sent := time.Now()
		rev, err := st.kv.Update(ctx, leaseKey(p), []byte(cfg.Holder), h.rev)
		cancel()
		switch {
		case err == nil:
			h.rev, h.renewed = rev, sent
			if !h.deadline.Stop() {
				// Fired: the partition is stopping already. The lease is
				// still ours: released (deleted) once it has stopped.
				if !h.stopping {
					st.l.log.Warn("partition lease renewed after its deadline; releasing it", "partition", p)
					st.stop(p, false)
				}
				continue
			}
			h.deadline.Reset(cfg.lostAfter() - time.Since(sent))
		case errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err):
			// Expired and taken, or expired: either way it is not ours.
			st.l.log.Warn("partition lease lost", "partition", p, "err", err)
			st.lose(p)
			continue
		default:
			st.l.log.Warn("lease renewal failed", "partition", p, "err", err)
		}
		if time.Since(h.renewed) > cfg.lostAfter() {
			st.l.log.Warn("partition lease not renewed in time; stopping it", "partition", p, "since", time.Since(h.renewed))
			st.lose(p)
		}
	}
}

// isWrongLastSeq reports a JetStream "wrong last sequence" rejection.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// snapshot reads every lease and member key: owners[p] is the holder of
// partition p ("" = free).
func (st *leaseState) snapshot() ([]string, map[string]struct{}, error) {
	ctx, cancel := st.opCtx()
	defer cancel()
	w, err := st.kv.WatchAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = w.Stop() }()
	owners := make([]string, st.l.cfg.Partitions)
	members := map[string]struct{}{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, nil, errors.New("pipeline: lease watcher closed")
			}
			if e == nil { // initial values done
				return owners, members, nil
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			key := e.Key()
			switch {
			case strings.HasPrefix(key, "m."):
				members[key[2:]] = struct{}{}
			case strings.HasPrefix(key, "p."):
				if p, err := strconv.Atoi(key[2:]); err == nil && p >= 0 && p < len(owners) {
					owners[p] = string(e.Value())
				}
			}
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// claim creates partition p's lease and starts the partition.
func (st *leaseState) claim(p int) bool {
	ctx, cancel := st.opCtx()
	sent := time.Now()
	rev, err := st.kv.Create(ctx, leaseKey(p), []byte(st.l.cfg.Holder))
	cancel()
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			st.l.log.Warn("lease claim failed", "partition", p, "err", err)
		}
		return false
	}
	pctx, pcancel := context.WithCancelCause(context.Background())
	lost := func() { pcancel(ErrLeaseLost) }
	st.parts[p] = &held{rev: rev, renewed: sent, startedAt: sent, cancel: lost,
		deadline: time.AfterFunc(st.l.cfg.lostAfter()-time.Since(sent), lost)}
	st.published()
	st.l.cfg.Metrics.Events.WithLabelValues(LeaseAcquired).Inc()
	st.l.log.Info("partition lease acquired", "partition", p)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		err := st.run(pctx, p, rev)
		st.done <- partDone{p, err} // buffered P: never blocks
	}()
	return true
}

// stop cancels partition p: released (its lease deleted once it ended) or
// lost (not renewed, not deleted).
func (st *leaseState) stop(p int, lost bool) {
	h := st.parts[p]
	if h == nil || h.stopping {
		if h != nil && lost {
			h.lost = true
		}
		return
	}
	h.stopping, h.lost = true, lost
	h.cancel()
}

func (st *leaseState) lose(p int) { st.stop(p, true) }

// ended handles the end of partition p's goroutine.
func (st *leaseState) ended(d partDone) {
	h := st.parts[d.p]
	if h == nil {
		return
	}
	if !h.deadline.Stop() && !h.stopping { // its deadline stopped it: lost
		st.l.log.Warn("partition lease not renewed in time; stopped", "partition", d.p, "since", time.Since(h.renewed))
		h.stopping, h.lost = true, true
	}
	switch {
	case !h.stopping:
		st.l.cfg.Metrics.Events.WithLabelValues(LeaseFailed).Inc()
	case h.lost:
		st.l.cfg.Metrics.Events.WithLabelValues(LeaseLost).Inc()
	default:
		st.l.cfg.Metrics.Events.WithLabelValues(LeaseReleased).Inc()
	}
	if !h.stopping { // it failed by itself: give the lease back, retry later
		st.l.log.Warn("partition stopped with an error; releasing it", "partition", d.p, "err", d.err)
		st.cooldown[d.p] = time.Now().Add(2*st.l.cfg.renewEvery() + time.Duration(rand.Int64N(int64(st.l.cfg.renewEvery()))))
	}
	if !h.lost {
		ctx, cancel := st.opCtx()
		err := st.kv.Delete(ctx, leaseKey(d.p), jetstream.LastRevision(h.rev))
		cancel()
		if err != nil {
			st.l.log.Warn("lease release failed (it expires instead)", "partition", d.p, "err", err)
		}
	}
	delete(st.parts, d.p)
	st.published()
	st.l.log.Info("partition stopped", "partition", d.p, "lost", h.lost)
}

// shutdown stops every partition, keeps renewing their leases while they
// drain, then releases them and the membership.
func (st *leaseState) shutdown(tick <-chan time.Time) {
	for p := range st.parts {
		st.stop(p, false)
	}
	for len(st.parts) > 0 {
		select {
		case d := <-st.done:
			st.ended(d)
		case <-tick:
			st.step(true)
		}
	}
	st.wg.Wait()
	ctx, cancel := st.opCtx()
	_ = st.kv.Delete(ctx, memberKey(st.l.cfg.Holder))
	cancel()
}

// activeByAge returns the held, not stopping partitions, oldest first.
func (st *leaseState) activeByAge() []int {
	var ps []int
	for p, h := range st.parts {
		if !h.stopping {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b int) int { return st.parts[a].startedAt.Compare(st.parts[b].startedAt) })
	return ps
}

// published copies the held set for Held.
func (st *leaseState) published() {
	ps := make([]int, 0, len(st.parts))
	for p := range st.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	st.l.mu.Lock()
	st.l.held = ps
	st.l.mu.Unlock()
	st.l.cfg.Metrics.Held.Set(float64(len(ps)))
}

func hashString(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}
