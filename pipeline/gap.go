package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrDeliveryGap is the cause with which an Ingest stops when a partition's
// consumer skipped deliveries (messages lost in flight when a connection or
// a consumer leader moved; see Ingest.Run). Nothing out of order was
// applied; a fresh Ingest replays from the ack floor, in order, skipping per
// thread what its checkpoint covers.
var ErrDeliveryGap = errors.New("pipeline: consumer delivery gap")

// ErrConsumerLost is the cause with which an Ingest stops when a partition's
// consumer no longer exists (a server restart forgot it: Config.
// ConsumerMemory; or it was deleted). A fresh Ingest recreates it after the
// partition's stored floor (floor.go). Restarting restarts on it only when
// RestartOnLost is set: in lease mode a lost consumer may mean another
// owner took the partition, and the lease machinery decides.
var ErrConsumerLost = errors.New("pipeline: partition consumer lost")

// deliveryGap checks that msg's consumer sequence follows *last (0: the
// first delivery, anything goes) and advances *last. It returns msg's stream
// seq (0: not a JetStream delivery), which the shard then need not parse
// from the reply subject a second time.
func deliveryGap(msg jetstream.Msg, last *uint64) (uint64, error) {
	seq, d, ok := ackReplySeqs(msg.Reply())
	if !ok {
		return 0, nil // not a JetStream delivery; the shard reports it
	}
	if *last != 0 && d != *last+1 {
		return seq, fmt.Errorf("%w: delivery %d after %d (stream seq %d)", ErrDeliveryGap, d, *last, seq)
	}
	*last = d
	return seq, nil
}

// ackReplySeqs returns the stream and consumer sequences of a JetStream
// delivery from its reply (ack) subject, read as nats.go's Msg.Metadata
// reads them, but without building a MsgMetadata: this runs once per
// delivered message. The two forms (ADR-15):
//
//	v1: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	v2: $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
//
// v1 has 9 tokens; v2 at least 11. ok is false for anything else.
func ackReplySeqs(reply string) (stream, consumer uint64, ok bool) {
	const prefix = "$JS.ACK."
	if len(reply) < len(prefix) || reply[:len(prefix)] != prefix {
		return 0, 0, false
	}
	tokens := strings.Count(reply, ".") + 1
	var skip int // tokens after the prefix before <sseq>
	switch {
	case tokens == 9:
		skip = 3
	case tokens >= 11:
		skip = 5
	default:
		return 0, 0, false
	}
	rest := reply[len(prefix):]
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	sseq, rest, _ := strings.Cut(rest, ".")
	cseq, _, _ := strings.Cut(rest, ".")
	return ackNum(sseq), ackNum(cseq), true
}

// ackNum parses a decimal token of an ack subject; 0 if it is not one (as
// nats.go's parser does).
func ackNum(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Service is what Restarting runs: an *Ingest, built afresh for each run.
type Service interface {
	Run(ctx context.Context, drain time.Duration) error
	Ready() bool
	Lag() uint64
}

// Restarting runs an Ingest, and a fresh one each time one stops on a
// delivery gap (or a lost consumer: RestartOnLost), until ctx ends or one
// stops for another reason. Build it
// with NewRestarting; Ready and Lag (of the current Ingest) are safe for
// concurrent use.
type Restarting struct {
	build func() (Service, error)
	// OnRestart, when set before Run, is called after each replacement.
	OnRestart func()
	// RestartOnLost, when set before Run, also replaces an Ingest that
	// stopped on ErrConsumerLost. Right when partitions are assigned
	// statically (nobody else can own them); not in lease mode.
	RestartOnLost bool

	mu       sync.Mutex
	cur      Service
	restarts int
}

// NewRestarting returns a Restarting that builds its Ingests with build.
func NewRestarting(build func() (Service, error)) *Restarting {
	return &Restarting{build: build}
}

// Ready reports whether the current Ingest is ready.
func (r *Restarting) Ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur != nil && r.cur.Ready()
}

// Lag returns the current Ingest's lag.
func (r *Restarting) Lag() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return 0
	}
	return r.cur.Lag()
}

// Restarts returns how many times an Ingest was replaced after a gap.
func (r *Restarting) Restarts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts
}

// Run runs Ingests (each with drain) until ctx ends; it returns the last
// one's error, never ErrDeliveryGap (nor, with RestartOnLost,
// ErrConsumerLost) unless ctx ended meanwhile.
func (r *Restarting) Run(ctx context.Context, drain time.Duration) error {
	for {
		in, err := r.build()
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.cur = in
		r.mu.Unlock()
		err = in.Run(ctx, drain)
		restart := errors.Is(err, ErrDeliveryGap) || r.RestartOnLost && errors.Is(err, ErrConsumerLost)
		if !restart || ctx.Err() != nil {
			return err
		}
		r.mu.Lock()
		r.restarts++
		r.mu.Unlock()
		if r.OnRestart != nil {
			r.OnRestart()
		}
	}
}
