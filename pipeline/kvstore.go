package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// kvStore is the CheckpointStore of a JetStream KV bucket. Puts are async
// JetStream publishes on $KV.<bucket>.<key> (what KeyValue.Put does, minus
// the wait), so a shard writes all of a batch's checkpoints in one round trip.
type kvStore struct {
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	prefix string // "$KV.<bucket>.": the subjects the records are stored on
	// pub is what a record is published on: prefix, behind the JetStream
	// API prefix of the bucket's domain when it has one (as KeyValue.Put
	// does), so that a put from a server of another domain (a leaf node's)
	// reaches the bucket.
	pub string
}

// newKVStore writes kv's records, in JetStream domain (empty: the
// connection's own), asynchronously; a put not answered within ackTimeout
// fails (Config.CheckpointAckTimeout).
func newKVStore(nc *nats.Conn, kv jetstream.KeyValue, bucket, domain string, ackTimeout time.Duration) (*kvStore, error) {
	js, err := newJetStream(nc, domain, jetstream.WithPublishAsyncMaxPending(1<<16), jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + bucket + "."
	pub := prefix
	if domain != "" {
		pub = apiPrefix(js.Options()) + prefix
	}
	return &kvStore{kv: kv, js: js, prefix: prefix, pub: pub}, nil
}

func (s *kvStore) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNoCheckpoint
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

func (s *kvStore) Put(_ context.Context, key string, value []byte, meta nats.Header) (PutFuture, error) {
	f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: s.pub + key, Data: value, Header: meta})
	if err != nil {
		return nil, err
	}
	return &kvFuture{f: f}, nil
}

// Purge publishes a KV purge marker (what KeyValue.Purge does) without
// waiting for it.
func (s *kvStore) Purge(key string) error {
	_, err := s.js.PublishMsgAsync(&nats.Msg{Subject: s.pub + key, Header: nats.Header{
		"KV-Operation": {"PURGE"},
		"Nats-Rollup":  {"sub"},
	}})
	return err
}

// kvFuture adapts a PubAckFuture, whose channels deliver once, to the
// repeatable PutFuture.
type kvFuture struct {
	f    jetstream.PubAckFuture
	done bool
	err  error
}

func (k *kvFuture) Result() (bool, error) {
	if !k.done {
		select {
		case <-k.f.Ok():
			k.done = true
		case err := <-k.f.Err():
			k.done, k.err = true, err
		default:
		}
	}
	return k.done, k.err
}

func (k *kvFuture) Wait(ctx context.Context) error {
	if !k.done {
		select {
		case <-k.f.Ok():
			k.done = true
		case err := <-k.f.Err():
			k.done, k.err = true, err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return k.err
}
