package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/wire"
)

// Ingest is the reducer service of one instance: it binds the consumers of
// its partitions, runs the shard goroutines, answers snapshot requests and
// reports health. Build it with NewIngest and call Run once.
//
// Ready, Lag and Stats are safe for concurrent use (health endpoints call
// them while Run runs).
type Ingest struct {
	cfg Config
	nc  *nats.Conn
	log *slog.Logger
	m   *Metrics

	running atomic.Bool
	ready   atomic.Bool
	lag     atomic.Uint64 // messages not yet delivered, summed over owned partitions
}

// ErrRunning is returned by a second call of Run.
var ErrRunning = errors.New("pipeline: ingest already ran")

// NewIngest validates cfg and returns an Ingest that will use nc. The caller
// keeps ownership of nc (Run does not close it).
func NewIngest(nc *nats.Conn, cfg Config) (*Ingest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Ingest{cfg: cfg, nc: nc, log: cfg.Logger, m: cfg.Metrics}, nil
}

// Ready reports whether every owned partition's consumer is bound and being
// consumed.
func (in *Ingest) Ready() bool { return in.ready.Load() }

// Lag returns the number of stored messages not yet delivered to this
// instance, summed over its partitions, as of the last poll (1 s).
func (in *Ingest) Lag() uint64 { return in.lag.Load() }

// Run creates or updates the stream and bucket, binds one durable consumer
// per owned partition, and processes messages until ctx ends. Then it shuts
// down in two phases: it stops fetching, lets the shards finish what they
// hold, checkpoints every dirty thread and acks what the checkpoints cover
// (bounded by drain, after which pending checkpoint writes are abandoned:
// their messages stay un-acked and are replayed on the next start). Run
// returns only after every goroutine it started has returned; its error is
// nil after a clean shutdown.
func (in *Ingest) Run(ctx context.Context, drain time.Duration) error {
	if !in.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	cfg := &in.cfg
	// A fenced checkpoint write (lease_fence.go) ends the run: another
	// instance owns one of our partitions now.
	ctx, fence := context.WithCancelCause(ctx)
	defer fence(nil)
	js, stream, kv, err := in.ensureStreams(ctx)
	if err != nil {
		return err
	}
	owned := cfg.OwnedPartitions()
	nShards := cfg.Shards
	if nShards == 0 || nShards > len(owned) {
		nShards = len(owned)
	}
	// hardCtx bounds the shards' blocking calls (checkpoint loads and
	// writes): live until drain has expired after ctx ended.
	hardCtx, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	// Snapshot replies larger than a window are sent window by window,
	// as the requester asks (wire.Responder): held until fetched, dropped
	// when Run returns.
	resp, err := wire.NewResponder(in.nc, wire.ResponderConfig{Window: cfg.ReplyWindow})
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	defer resp.Close()
	shards, partShard, err := in.newShards(ctx, js, kv, stream, resp, fence, owned, nShards)
	if err != nil {
		return err
	}
	if cfg.Tap && cfg.TapStream != "" {
		tap, err := newTapPublisher(in.nc, cfg, in.m, in.log)
		if err != nil {
			return fmt.Errorf("pipeline: tap: %w", err)
		}
		for _, sh := range shards {
			sh.tap = tap
		}
		// The tap acks still awaited when the shards are done: a
		// message whose ack does not come within the bound is counted
		// failed by its timeout, or never (it may be stored all the same).
		defer tap.wait(min(drain, tapAckTimeout))
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh.run(stop, hardCtx)
		}()
	}
	// From here on, every exit path goes through shutdown.
	ccs, subs, startErr := in.startIntake(ctx, hardCtx, stream, owned, partShard, fence)
	if startErr == nil {
		in.ready.Store(true)
		in.log.Info("ingest running", "instance", cfg.Instance, "instances", cfg.Instances,
			"partitions", len(owned), "shards", nShards)
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.pollLag(ctx, stream, owned)
		}()
		<-ctx.Done()
	}

	// Phase 1 (soft): stop intake.
	in.ready.Store(false)
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	for _, cc := range ccs {
		cc.Stop()
	}
	drainTimer := time.AfterFunc(drain, hardCancel) // phase 2 (hard) when drain runs out
	defer drainTimer.Stop()
	for _, cc := range ccs {
		select {
		case <-cc.Closed():
		case <-hardCtx.Done():
		}
	}
	// Phase 2: shards finish their queues, checkpoint and ack, then return.
	close(stop)
	wg.Wait()
	if startErr != nil {
		return startErr
	}
	return in.stopResult(ctx, hardCtx, shards, drain)
}

// ensureStreams creates or updates the event stream and the checkpoint
// bucket, first lowering the largest accepted message to the server's
// max_payload when that is smaller.
func (in *Ingest) ensureStreams(ctx context.Context) (jetstream.JetStream, jetstream.Stream, jetstream.KeyValue, error) {
	cfg := &in.cfg
	js, err := newJetStream(in.nc, cfg.Domain)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pipeline: jetstream: %w", err)
	}
	// The stream cannot accept a message the server refuses: with a server
	// whose max_payload is below MaxMsgSize (an external cluster left at
	// nats-server's 1 MiB default), the server's limit is the largest event.
	if mp := in.nc.MaxPayload(); mp > 0 && int64(cfg.MaxMsgSize) > mp {
		in.log.Warn("the NATS server's max_payload is below the largest accepted message; events are limited to it (raise max_payload: docs/production.md)",
			"max_payload", mp, "max_msg_size", cfg.MaxMsgSize)
		cfg.MaxMsgSize = int32(mp)
	}
	stream, kv, err := EnsureStreams(ctx, js, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return js, stream, kv, nil
}

// newShards builds nShards shards, each with its fenced checkpoint store,
// and binds each owned partition's consumer (from its stored floor) to
// the shard that will own it: partition owned[i] to shard i % nShards.
func (in *Ingest) newShards(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, stream jetstream.Stream,
	resp *wire.Responder, fence context.CancelCauseFunc, owned []int, nShards int) ([]*shard, map[int]*shard, error) {
	cfg := &in.cfg
	shards := make([]*shard, nShards)
	for i := range shards {
		base, err := newKVStore(in.nc, kv, cfg.Bucket, cfg.Domain, cfg.CheckpointAckTimeout)
		if err != nil {
			return nil, nil, fmt.Errorf("pipeline: kv store: %w", err)
		}
		store, err := newFencedStore(ctx, js, base, cfg.Bucket, fence)
		if err != nil {
			return nil, nil, err
		}
		shards[i] = newShard(i, cfg, in.log, in.m, in.nc, store)
		shards[i].resp = resp
	}
	partShard := make(map[int]*shard, len(owned))
	for i, p := range owned {
		sh := shards[i%nShards]
		known, err := loadFloor(ctx, sh.store, p)
		if err != nil {
			return nil, nil, err
		}
		cons, err := bindConsumer(ctx, stream, cfg, p, known)
		if err != nil {
			return nil, nil, err
		}
		sh.parts[p] = &partState{p: p, cons: cons, dirty: make(map[*hotThread]struct{})}
		partShard[p] = sh
	}
	return shards, partShard, nil
}

// startIntake starts consuming every owned partition, serving its
// snapshot requests and consuming the strays. What it started is returned
// even with an error, for Run to stop.
func (in *Ingest) startIntake(ctx, hardCtx context.Context, stream jetstream.Stream, owned []int, partShard map[int]*shard,
	fence context.CancelCauseFunc) (ccs []jetstream.ConsumeContext, subs []*nats.Subscription, err error) {
	cfg := &in.cfg
	for _, p := range owned {
		sh := partShard[p]
		cc, err := in.consumePartition(hardCtx, sh, p, fence)
		if err != nil {
			return ccs, subs, err
		}
		ccs = append(ccs, cc)
		sub, err := in.nc.Subscribe(wire.SnapPartitionWildcard(p), func(req *nats.Msg) {
			if !sh.snapq.add(req) { // overflow policy: tail drop (snapshot.go)
				in.m.Snapshots.WithLabelValues("busy").Inc()
				snapError(req, wire.SnapErrBusy, "snapshot queue full")
			}
		})
		if err != nil {
			return ccs, subs, fmt.Errorf("pipeline: subscribe snapshots %d: %w", p, err)
		}
		subs = append(subs, sub)
	}
	strays, err := straysConsumer(ctx, stream, cfg)
	if err != nil {
		return ccs, subs, err
	}
	cc, err := in.consumeStrays(strays)
	if err != nil {
		return ccs, subs, fmt.Errorf("pipeline: consume strays: %w", err)
	}
	ccs = append(ccs, cc)
	return ccs, subs, nil
}

// consumePartition starts consuming partition p into shard sh.
//
// Deliveries must arrive gapless: a message lost in flight (a connection or
// consumer leader moved) is redelivered only after AckWait, behind newer
// ones, which a shard would then apply first and the lost one never
// (seq <= lastSeq). So a jump in the consumer (delivery) sequence stops the
// run with ErrDeliveryGap before the out-of-order message is queued; the
// caller starts a fresh Ingest, which replays in order from the ack floor
// (gap.go). lastDelivery is owned by this consumer's callback, which
// nats.go calls serially.
func (in *Ingest) consumePartition(hardCtx context.Context, sh *shard, p int, fence context.CancelCauseFunc) (jetstream.ConsumeContext, error) {
	cfg := &in.cfg
	ps := sh.parts[p]
	var lastDelivery uint64
	gapped := false
	cc, err := ps.cons.Consume(func(msg jetstream.Msg) {
		if gapped {
			return
		}
		seq, gap := deliveryGap(msg, &lastDelivery)
		if gap != nil {
			gapped = true
			in.log.Warn("delivery gap; restarting the partitions from their ack floors", "partition", p, "err", gap)
			fence(gap)
			return
		}
		// Back-pressure: the queue is bounded; while it is full this
		// handler waits, the consumer's buffer (PullMaxMessages)
		// fills, and the server stops delivering.
		select {
		case sh.q <- delivery{msg, seq}:
		case <-hardCtx.Done():
		}
	}, // The client-side buffer per partition is bounded in count
		// and bytes: batches of events are big messages.
		jetstream.PullMaxMessagesWithBytesLimit(max(64, cfg.QueueLen/2), max(pullMaxBytes, 4*int(cfg.MaxMsgSize))),
		// A pull request held by a consumer leader that went away
		// is only noticed by missing heartbeats (2 × heartbeat):
		// with nats.go's default 5 s that stalled a partition for
		// 10 s after a NATS server stopped (cluster_test.go).
		jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			in.log.Debug("consume", "partition", p, "err", err)
			if lost := consumerLost(hardCtx, ps.cons, err); lost != nil {
				in.log.Warn("partition consumer lost; restarting from the stored floors", "partition", p, "err", lost)
				fence(fmt.Errorf("%w: partition %d: %v", ErrConsumerLost, p, lost))
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("pipeline: consume partition %d: %w", p, err)
	}
	return cc, nil
}

// stopResult is Run's error once its shards have returned: the cause that
// ended the run (a fence, a delivery gap, a lost consumer), or what the
// drain left undone.
func (in *Ingest) stopResult(ctx, hardCtx context.Context, shards []*shard, drain time.Duration) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrFenced) || errors.Is(cause, ErrDeliveryGap) || errors.Is(cause, ErrConsumerLost) {
		return cause
	}
	// The shards have returned: what they left dirty is read safely here.
	var unsaved error
	if n := uncheckpointed(shards); n > 0 {
		unsaved = fmt.Errorf("%w: %d threads (their events are replayed at the next start)", ErrUncheckpointed, n)
		in.log.Error("ingest stopped with views not checkpointed", "threads", n)
	}
	if hardCtx.Err() != nil {
		return errors.Join(fmt.Errorf("pipeline: drain did not finish within %v: %w", drain, context.DeadlineExceeded), unsaved)
	}
	if unsaved != nil {
		return unsaved
	}
	in.log.Info("ingest stopped")
	return nil
}

// ErrUncheckpointed is returned by Run when, at shutdown, some threads'
// last checkpoint writes had failed (a full disk, a bucket over its size
// limit): nothing acknowledged is lost, since their messages stay un-acked
// and are replayed at the next start, but the views were not saved.
var ErrUncheckpointed = errors.New("pipeline: views not checkpointed at shutdown")

// uncheckpointed counts the threads still dirty in shards that have
// returned.
func uncheckpointed(shards []*shard) int {
	n := 0
	for _, sh := range shards {
		for _, ps := range sh.parts {
			n += len(ps.dirty)
		}
	}
	return n
}

// consumerLost reports, for an error Consume gave, whether the consumer is
// gone (the error saying so; nil if it is not). Deletion is reported as
// such; a consumer a server restart forgot (Config.ConsumerMemory) shows
// only as missed heartbeats and unanswered pulls, so those make it ask the
// server (at most once per heartbeat period).
func consumerLost(ctx context.Context, cons jetstream.Consumer, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
		return err
	case errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, nats.ErrNoResponders):
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, ierr := cons.Info(ictx); errors.Is(ierr, jetstream.ErrConsumerNotFound) {
			return ierr
		}
	}
	return nil
}

// pullMaxBytes bounds the bytes a partition's consumer buffers client-side.
const pullMaxBytes = 8 << 20

// bindConsumer (re)creates partition p's durable consumer so that it
// delivers from its ack floor, in stream order.
//
// Why recreate: after a crash, messages between the ack floor and the last
// delivery are only redelivered after AckWait, interleaved with new ones, so
// a thread could see a later event before an earlier one. Recreating the
// consumer at ack floor + 1 makes the replay ordered. This is safe because a
// partition has one owner at a time (static assignment, or a lease).
//
// Earlier incarnations are every consumer of p, under the static name or an
// epoch name (lease mode, ConsumerEpoch): the new one starts after the
// highest of their ack floors — each floor is covered by stored checkpoints,
// since acks follow checkpoints — and they are deleted after it exists. If
// the process dies in between, the next start sees both and starts from the
// same floor. With no consumer at all (the first start, or a server restart
// that lost memory-stored consumers: Config.ConsumerMemory) it starts after
// known, the floor the shards stored in the bucket (storeFloor), or at the
// stream's beginning when there is none; every replayed event a checkpoint
// already covers is skipped by its thread's checkpoint seq: slower, never
// wrong.
func bindConsumer(ctx context.Context, stream jetstream.Stream, cfg *Config, p int, known uint64) (jetstream.Consumer, error) {
	name := cfg.ConsumerName(p)
	cc := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "Threadcast ingest, partition " + strconv.Itoa(p),
		FilterSubject: wire.PartitionFilter(p),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		MaxDeliver:    -1,
		Replicas:      cfg.Replicas,
		MemoryStorage: cfg.ConsumerMemory,
	}
	olds, err := partitionConsumers(ctx, stream, cfg, p)
	if err != nil {
		return nil, err
	}
	var floor uint64
	for _, o := range olds {
		c, err := stream.Consumer(ctx, o)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pipeline: consumer %s: %w", o, err)
		}
		floor = max(floor, c.CachedInfo().AckFloor.Stream)
		if o == name { // the same durable cannot be re-created in place
			if err := stream.DeleteConsumer(ctx, name); err != nil {
				return nil, fmt.Errorf("pipeline: reset consumer %s: %w", name, err)
			}
		}
	}
	// A stored floor past the stream's end belongs to an earlier stream of
	// the same name (deleted and recreated): it must not skip this one's.
	if last := stream.CachedInfo().State.LastSeq; known <= last {
		floor = max(floor, known)
	}
	if floor > 0 {
		cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cc.OptStartSeq = floor + 1
	}
	cons, err := stream.CreateConsumer(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("pipeline: create consumer %s: %w", name, err)
	}
	for _, o := range olds {
		if o != name {
			if err := stream.DeleteConsumer(ctx, o); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return nil, fmt.Errorf("pipeline: delete consumer %s: %w", o, err)
			}
		}
	}
	return cons, nil
}

// partitionConsumers lists the consumers of partition p: the static name
// <prefix>-p<p> and every epoch name <prefix>-p<p>-e<n>.
func partitionConsumers(ctx context.Context, stream jetstream.Stream, cfg *Config, p int) ([]string, error) {
	base := fmt.Sprintf("%s-p%d", cfg.ConsumerPrefix, p)
	lister := stream.ConsumerNames(ctx)
	var out []string
	for n := range lister.Name() {
		if n == base {
			out = append(out, n)
			continue
		}
		if rest, ok := strings.CutPrefix(n, base+"-e"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			out = append(out, n)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("pipeline: list consumers: %w", err)
	}
	return out, nil
}

// pollLag refreshes the lag gauges every second until ctx ends.
func (in *Ingest) pollLag(ctx context.Context, stream jetstream.Stream, owned []int) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var total uint64
		for _, p := range owned {
			c, err := stream.Consumer(ctx, in.cfg.ConsumerName(p))
			if err != nil {
				continue
			}
			info := c.CachedInfo()
			label := strconv.Itoa(p)
			in.m.Lag.WithLabelValues(label).Set(float64(info.NumPending))
			in.m.AckPending.WithLabelValues(label).Set(float64(info.NumAckPending))
			total += info.NumPending
		}
		in.lag.Store(total)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
