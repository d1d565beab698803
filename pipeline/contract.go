package pipeline

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
)

// The stage boundaries of a shard. Implementations are lean and named after
// their backend (kvStore); the contracts are here.

// ErrNoCheckpoint is returned by CheckpointStore.Get for a thread that has
// never been checkpointed (or whose checkpoint aged out of the bucket).
var ErrNoCheckpoint = errors.New("pipeline: no checkpoint")

// CheckpointStore keeps one checkpoint record per thread.
//
// Ordering and atomicity: Put replaces the whole value of a key; a Get after
// a successful Put's future returns that value or a later one. Puts of
// different keys are independent: there is no multi-key atomicity, which is
// why acks follow the per-partition low watermark (doc.go) rather than any
// one checkpoint.
//
// Blocking: Get blocks for one round trip and honours ctx. Put does not wait
// for the write: it returns a future that reports the outcome, and the caller
// must not treat the checkpoint as stored (nor ack what it covers) before
// that future reports success. (Put may first read the key back, one round
// trip bounded by ctx: the fenced store does after a write of unknown
// outcome.) A failed Put's value may or may not have been stored (an answer
// that never came); the caller retries by putting again. The value passed to
// Put must not be modified until the future has reported.
//
// A CheckpointStore belongs to one shard. Its Gets of different keys may
// run at once (the shard reads the checkpoints of a batch's threads
// together); Put and Purge are called by the shard's goroutine, never
// while a Get is in flight.
//
// Purge removes a key and its history, fire-and-forget (a lost purge leaves
// garbage, never a wrong view). It is used for the chunks of a superseded
// large checkpoint.
type CheckpointStore interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, value []byte, meta nats.Header) (PutFuture, error)
	Purge(key string) error
}

// PutFuture is the pending outcome of a CheckpointStore.Put. Result reports
// it without blocking (done is false while the store has not answered); Wait
// blocks until the store has answered or ctx ends (then it returns ctx.Err()
// and the outcome is unknown: the caller must treat the put as failed). Once
// done, both keep returning the same outcome. A future is used by one
// goroutine.
type PutFuture interface {
	Result() (done bool, err error)
	Wait(ctx context.Context) error
}

// Publisher sends core NATS messages: frames, snapshot replies, dead letters
// and the tap (with a tap stream, through the tap publisher of tap.go,
// which is one too). Delivery is at most once and fire-and-forget — a slow
// or absent subscriber never blocks a shard; consumers detect a lost frame
// by Tc-Prev and resynchronise. PublishMsg copies msg.Data and the headers
// before returning and keeps no reference to msg, so the caller may reuse
// the message and its buffers. *nats.Conn satisfies it.
type Publisher interface {
	PublishMsg(msg *nats.Msg) error
}
