package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// Config is everything a pipeline needs besides its NATS connection. Build it
// with DefaultConfig and change fields; only cmd/* maps flags and environment
// variables onto it.
type Config struct {
	// Stream is the JetStream stream holding the event log; Bucket the KV
	// bucket holding checkpoints.
	Stream string
	Bucket string

	// Partitions is P. It is part of the stream's subject transform, so it is
	// fixed for the life of the stream: changing it re-partitions new
	// messages only, and threads would straddle two partitions. (Update of
	// the transform is refused by EnsureStreams when it would change P.)
	Partitions int
	// Instance i of Instances owns the partitions p with p % Instances == i.
	Instance, Instances int
	// Shards is the number of shard goroutines per instance; owned
	// partitions are dealt onto them round robin. 0 means one per owned
	// partition. Fewer shards mean bigger per-batch coalescing.
	Shards int

	// Domain is the JetStream domain of the stream and buckets ("" = the
	// connection's own). Several server URLs, reconnects and credentials
	// belong to the caller's *nats.Conn.
	Domain string

	// Stream and bucket settings, applied idempotently at start.
	Replicas int
	MaxAge   time.Duration // event log retention by age (0 = unlimited)
	MaxBytes int64         // event log retention by size (-1 = unlimited)
	// MaxMsgSize is the largest accepted message (one event or one
	// batch): the stream's max message size, which the NATS server's
	// max_payload must allow (the embedded server is started with it).
	MaxMsgSize int32
	Duplicates time.Duration // Nats-Msg-Id de-duplication window
	KVMaxBytes int64         // checkpoint bucket size limit (-1 = unlimited)
	// DeadLetters is the stream that keeps what is published on dlq.>
	// (DeadLetterStreamConfig), bounded by DeadLetterMaxAge and
	// DeadLetterMaxBytes (the oldest go first); "" keeps none.
	DeadLetters        string
	DeadLetterMaxAge   time.Duration
	DeadLetterMaxBytes int64

	// Consumers.
	ConsumerPrefix string        // durable names are <prefix>-p<partition>
	MaxAckPending  int           // per partition; bounds un-acked messages in flight
	AckWait        time.Duration // redelivery timeout of an un-acked message
	QueueLen       int           // per-shard bound on delivered, unprocessed messages
	// ConsumerMemory keeps each partition consumer's state (delivered and
	// ack floor) in the server's memory instead of a file the server
	// rewrites several times a second: the position is soft state here,
	// since checkpoints (with the seq each covers) are the durable record,
	// and each shard also stores its partitions' ack floors in the bucket
	// (at most every second and at shutdown). A consumer lost with a
	// server restart is recreated from that floor; events it replays that
	// a checkpoint already covers are skipped.
	ConsumerMemory bool
	// SnapshotQueue bounds the distinct threads with snapshot requests
	// queued per shard (requests for a queued thread share its reply); a
	// request beyond it is answered "busy". 0 means DefaultSnapshotQueue.
	SnapshotQueue int
	// ConsumerEpoch, when not 0, is part of the durable names (lease mode
	// sets the lease's revision): each ownership of a partition gets a
	// consumer of its own, so a stale owner's acks (AckAll) reach its own,
	// deleted consumer and can never acknowledge the new owner's messages.
	ConsumerEpoch uint64

	// Checkpoints: a dirty thread is checkpointed after CheckpointEvery
	// applied events, after CheckpointInterval, and at shutdown. A run's
	// end is not a reason of its own: listings see its status within
	// CheckpointInterval.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// CheckpointAckTimeout bounds the wait for a checkpoint write's
	// answer: one not answered by then fails (its outcome unknown: it may
	// have been stored) and the shard writes the checkpoint again. Without
	// it, a write whose answer was lost (a route cut between this
	// process's server and the bucket's leader) would never report, and
	// its thread's partition would never ack again. Across slow routes
	// (a cluster stretched over regions) it may need to be longer.
	CheckpointAckTimeout time.Duration

	// FrameInterval is the least time between two frames of a thread:
	// the batches of a busy thread that arrive closer together are
	// coalesced into one frame. A thread whose last frame is older is
	// framed after its batch at once, however busy the rest of its shard,
	// so the interval adds latency only to threads that framed within it.
	// 0 publishes after every batch.
	FrameInterval time.Duration

	// MemoryBudget bounds the summed reducer MemSize of hot threads per
	// shard; beyond it, clean least-recently-used threads are evicted.
	MemoryBudget int64

	// MaxViewBytes bounds one thread's view as reducer.Thread.ViewSize
	// measures it: about its encoded size, and the same whether the thread
	// was built in memory or reloaded from its checkpoint, so that a replay
	// decides as the first pass did. An event that would take a view past
	// it is not applied: the thread's run ends rejected with
	// ErrViewTooLarge as its reason (a RUN_ERROR for AG-UI subscribers),
	// the event is dead-lettered (kind too-big) and counted (ViewLimit).
	// The thread stays readable; only events that keep it within the limit
	// apply after. 0 means no limit.
	MaxViewBytes int64

	// ReplyWindow is how much of a large snapshot reply is sent before the
	// requester asks for more (wire.Responder): each reply in flight may
	// have this much buffered in the NATS server for the requester's
	// connection, which the server closes as a slow consumer past its
	// max_pending (64 MiB by default). 0 means wire.DefaultWindow (16 MiB).
	ReplyWindow int

	// Tap enables the analytics tap subjects.
	Tap bool
	// TapStream keeps what the tap publishes (TapStreamConfig: every
	// subject under tap.>), bounded by TapMaxAge and TapMaxBytes (the
	// oldest go first), with the event log's Replicas; "" keeps none (the
	// tap is live only). Run summaries carry a Nats-Msg-Id (RunSummary),
	// deduplicated by the stream within TapDuplicates: the bound on how
	// long after its first publication a summary replayed after a crash
	// is still recognised. TapMaxInFlight bounds the tap publishes whose
	// store acknowledgement is awaited (tap.go). TapKeep says what the
	// stream keeps: TapKeepSummaries (the run summaries, one message per
	// run) or TapKeepAll (every normalized event too: one stored message
	// per event, which costs ingest a large share of its throughput, see
	// bench/README.md; the events themselves are always in the event log).
	TapKeep        string
	TapStream      string
	TapMaxAge      time.Duration
	TapMaxBytes    int64
	TapDuplicates  time.Duration
	TapMaxInFlight int

	// Runs, when set, receives every run summary as its run ends
	// (RunSink: called on the shard goroutine, it must not block), with
	// the run's tool call and subagent spans. A run that ended in a tail
	// replayed after a crash is handed to it again.
	Runs RunSink

	// Quota holds tenants to their ingest quotas by shedding (quota.go):
	// events over their tenant's events/s or bytes/s in a partition, or
	// arriving while its retained events are over quota (Retained), are not
	// applied and go to the dead letters. Its zero value limits nothing.
	Quota quota.Config
	// Retained, when set, reports a tenant's retained events quota as
	// exceeded (RetainedCounter.Check): such a tenant's events are shed.
	Retained func(tenant string) error

	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives counters; nil means no metrics.
	Metrics *Metrics
}

// Size defaults. DefaultMaxMsgSize is 8 MiB, the largest max_payload
// nats-server recommends (it accepts up to 64 MiB), so that a single event
// of several megabytes — a large tool result, a big state — is accepted;
// frames and snapshot replies larger than that travel in parts (package
// wire), so the view is not bounded by it. DefaultMaxViewBytes is 256 MiB.
const (
	DefaultMaxMsgSize   = 8 << 20
	DefaultMaxViewBytes = 256 << 20
)

// Durable tap defaults: a day and 1 GiB of tap kept, run summaries
// deduplicated for 10 minutes, 8192 tap publishes awaiting their ack.
const (
	DefaultTapMaxAge      = 24 * time.Hour
	DefaultTapMaxBytes    = 1 << 30
	DefaultTapDuplicates  = 10 * time.Minute
	DefaultTapMaxInFlight = 8192

	// What the tap stream keeps (Config.TapKeep).
	TapKeepSummaries = "summaries"
	TapKeepAll       = "all"
)

// EventHeaderRoom is what MaxEventBytes leaves of MaxMsgSize for the
// headers a publisher adds (the agent SDK keeps as much).
const EventHeaderRoom = 512

// MaxEventBytes is the largest single event the pipeline accepts: one
// message of MaxMsgSize with room for its headers. The HTTP bridge refuses
// a larger one with 413.
func (c *Config) MaxEventBytes() int { return int(c.MaxMsgSize) - EventHeaderRoom }

// DefaultConfig returns a fresh Config with the defaults.
func DefaultConfig() Config {
	return Config{
		Stream:               wire.DefaultStream,
		Bucket:               wire.DefaultViewsKV,
		Partitions:           wire.DefaultParts,
		Instance:             0,
		Instances:            1,
		Shards:               4,
		Replicas:             1,
		MaxAge:               7 * 24 * time.Hour,
		MaxBytes:             -1,
		MaxMsgSize:           DefaultMaxMsgSize,
		MaxViewBytes:         DefaultMaxViewBytes,
		Duplicates:           2 * time.Minute,
		KVMaxBytes:           -1,
		DeadLetters:          wire.DefaultDeadLetters,
		DeadLetterMaxAge:     7 * 24 * time.Hour,
		DeadLetterMaxBytes:   256 << 20,
		ConsumerPrefix:       "ingest",
		ConsumerMemory:       true,
		MaxAckPending:        20000,
		AckWait:              2 * time.Minute,
		QueueLen:             4096,
		CheckpointEvery:      1024,
		CheckpointInterval:   time.Second,
		CheckpointAckTimeout: 10 * time.Second,
		FrameInterval:        5 * time.Millisecond,
		MemoryBudget:         256 << 20,
		Tap:                  true,
		TapKeep:              TapKeepSummaries,
		TapStream:            wire.DefaultTapStream,
		TapMaxAge:            DefaultTapMaxAge,
		TapMaxBytes:          DefaultTapMaxBytes,
		TapDuplicates:        DefaultTapDuplicates,
		TapMaxInFlight:       DefaultTapMaxInFlight,
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("pipeline: bad config")

// Validate checks the config for values the pipeline cannot run with.
func (c *Config) Validate() error {
	switch {
	case c.Stream == "" || c.Bucket == "":
		return fmt.Errorf("%w: stream and bucket names are required", ErrConfig)
	case c.DeadLetters != "" && (c.DeadLetterMaxAge <= 0 || c.DeadLetterMaxBytes <= 0):
		return fmt.Errorf("%w: dead letters are kept for a bounded time and size: max age %v, max bytes %d", ErrConfig, c.DeadLetterMaxAge, c.DeadLetterMaxBytes)
	case c.Tap && c.TapStream != "" && (c.TapMaxAge <= 0 || c.TapMaxBytes <= 0 || c.TapDuplicates <= 0 || c.TapDuplicates > c.TapMaxAge || c.TapMaxInFlight < 1):
		return fmt.Errorf("%w: the tap stream is kept for a bounded time and size, deduplicating within at most that time: max age %v, max bytes %d, duplicates %v, max in flight %d",
			ErrConfig, c.TapMaxAge, c.TapMaxBytes, c.TapDuplicates, c.TapMaxInFlight)
	case c.Tap && c.TapStream != "" && c.TapKeep != TapKeepSummaries && c.TapKeep != TapKeepAll:
		return fmt.Errorf("%w: the tap stream keeps %q or %q, not %q", ErrConfig, TapKeepSummaries, TapKeepAll, c.TapKeep)
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return fmt.Errorf("%w: partitions %d not in [1, 65536]", ErrConfig, c.Partitions)
	case c.Instances < 1 || c.Instance < 0 || c.Instance >= c.Instances:
		return fmt.Errorf("%w: instance %d of %d", ErrConfig, c.Instance, c.Instances)
	case c.FrameInterval < 0 || c.FrameInterval > time.Second:
		return fmt.Errorf("%w: frame interval %v not in [0, 1s]", ErrConfig, c.FrameInterval)
	case c.Shards < 0:
		return fmt.Errorf("%w: shards %d", ErrConfig, c.Shards)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: replicas %d not in [1, 5]", ErrConfig, c.Replicas)
	case c.MaxMsgSize < 1024 || c.MaxMsgSize > 64<<20:
		return fmt.Errorf("%w: max message size %d not in [1024, 64 MiB]", ErrConfig, c.MaxMsgSize)
	case c.ReplyWindow < 0:
		return fmt.Errorf("%w: reply window %d", ErrConfig, c.ReplyWindow)
	case c.MaxViewBytes < 0:
		return fmt.Errorf("%w: max view bytes %d", ErrConfig, c.MaxViewBytes)
	case c.SnapshotQueue < 0:
		return fmt.Errorf("%w: snapshot queue %d", ErrConfig, c.SnapshotQueue)
	case c.MaxAckPending < 1 || c.QueueLen < 1:
		return fmt.Errorf("%w: max ack pending %d, queue %d", ErrConfig, c.MaxAckPending, c.QueueLen)
	case c.CheckpointEvery < 1 || c.CheckpointInterval <= 0:
		return fmt.Errorf("%w: checkpoint every %d / %v", ErrConfig, c.CheckpointEvery, c.CheckpointInterval)
	case c.CheckpointAckTimeout <= 0:
		return fmt.Errorf("%w: checkpoint ack timeout %v", ErrConfig, c.CheckpointAckTimeout)
	case c.AckWait <= c.CheckpointInterval:
		return fmt.Errorf("%w: ack wait %v must exceed the checkpoint interval %v", ErrConfig, c.AckWait, c.CheckpointInterval)
	case c.ConsumerPrefix == "" || !tokenSafe(c.ConsumerPrefix):
		return fmt.Errorf("%w: consumer prefix %q", ErrConfig, c.ConsumerPrefix)
	}
	return nil
}

// OwnedPartitions returns the partitions this instance owns, ascending.
func (c *Config) OwnedPartitions() []int {
	var ps []int
	for p := c.Instance; p < c.Partitions; p += c.Instances {
		ps = append(ps, p)
	}
	return ps
}

// ConsumerName returns the durable consumer name of partition p:
// <prefix>-p<p>, or <prefix>-p<p>-e<epoch> when ConsumerEpoch is set.
func (c *Config) ConsumerName(p int) string {
	if c.ConsumerEpoch != 0 {
		return fmt.Sprintf("%s-p%d-e%d", c.ConsumerPrefix, p, c.ConsumerEpoch)
	}
	return fmt.Sprintf("%s-p%d", c.ConsumerPrefix, p)
}
