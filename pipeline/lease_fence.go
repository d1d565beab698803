package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// ErrFenced is the cause with which an Ingest stops when a checkpoint write
// was refused because another writer changed the thread's checkpoint since
// this instance read or wrote it: another instance owns the partition now.
var ErrFenced = errors.New("pipeline: checkpoint fenced: another instance wrote this thread")

// fencedStore is the CheckpointStore an Ingest uses: a kvStore whose thread
// checkpoint writes are conditional. Each write carries
// Nats-Expected-Last-Subject-Sequence = the revision this store last read or
// wrote for the key (0: the key must not exist), so the server refuses it if
// anyone else wrote the key in between. That is the fence: a
// stale owner — one that lost its partition lease but has not stopped yet (a
// paused process, a slow drain) — can never overwrite the new owner's
// checkpoint, and so can never make a later replay skip events the new owner
// has not checkpointed. A refused write makes the whole Ingest stop with
// ErrFenced (onFence); its un-acked messages are replayed by the owner.
//
// A write whose outcome is unknown (no answer in time, a connection or
// cluster error: it may or may not have been stored) leaves its key's
// revision unknown. The next write of the key reads the key's last message
// back and goes on only if it is the one this store last knew (the write
// was not stored) or the one this write stored (each fenced write carries
// ckptWriterHeader, unique to the write); anything else is another
// writer's, and the write is fenced. Taking the revision read back as it
// is would make the stale owner's next write overwrite whatever the new
// owner wrote since: the new owner has acked the events its checkpoint
// covers, so a replay after that would never apply them again.
//
// Chunk keys ("_c.…", named by generation) are not fenced: a generation's
// chunks hold the same bytes whoever writes them, and only a fenced head
// makes them reachable.
//
// revs and unsure are owned by the shard goroutine that owns the store (Get,
// Put, forget and the futures' Wait/Result all run there). They hold the
// keys of the shard's hot threads: the shard forgets a key when it evicts
// its thread, and when it read the key for a thread it does not keep hot
// (a snapshot of a cold thread: shard.forgetCold), and reads it again (Get)
// before it writes it again.
type fencedStore struct {
	*kvStore
	// api and streamName address the bucket's stream KV_<bucket> (its
	// last message per subject, with its sequence) through the JetStream
	// API of the store's domain.
	api, streamName string
	revs            map[string]uint64
	unsure          map[string]unsureWrite
	// writer names this store in ckptWriterHeader (random); writes
	// counts its writes, so that each carries its own value.
	writer string
	writes uint64
	// mu guards revs and unsure where Get writes them: a shard reads
	// several keys at once (preload); everything else runs on the shard's
	// goroutine while no read is in flight.
	mu      sync.Mutex
	onFence func(error)
	// fencedErr is set by the first refused write: from then on every
	// fenced write fails at once (no silent re-read of the revision: this
	// instance has lost a partition and must stop, not retry).
	fencedErr error
}

// unsureWrite is a fenced write whose outcome is unknown: prev is the
// revision it expected, id its ckptWriterHeader.
type unsureWrite struct {
	prev uint64
	id   string
}

// ckptWriterHeader identifies the write that stored a checkpoint head:
// "<store>.<write>", unique to one write of one fencedStore.
const ckptWriterHeader = "Tc-Writer"

func newFencedStore(ctx context.Context, js jetstream.JetStream, base *kvStore, bucket string, onFence func(error)) (*fencedStore, error) {
	if _, err := js.Stream(ctx, "KV_"+bucket); err != nil {
		return nil, fmt.Errorf("pipeline: bucket stream KV_%s: %w", bucket, err)
	}
	return &fencedStore{kvStore: base, api: apiPrefix(js.Options()), streamName: "KV_" + bucket,
		revs: make(map[string]uint64), unsure: make(map[string]unsureWrite),
		writer: strconv.FormatUint(rand.Uint64(), 36), onFence: onFence}, nil
}

// fenced reports whether writes of key are conditional on its last
// revision: checkpoint heads are; chunks ("_c.", written before the head
// that points at them) and partition floors ("_f.", advisory: floor.go)
// are not.
func fenced(key string) bool { return !strings.HasPrefix(key, "_c.") && !strings.HasPrefix(key, "_f.") }

// Get reads the key's last message from the bucket stream's leader (delete
// and purge markers included, so their sequence is known) and remembers its
// revision.
func (s *fencedStore) Get(ctx context.Context, key string) ([]byte, error) {
	rev, val, err := s.last(ctx, key)
	if err != nil {
		return nil, err
	}
	if fenced(key) {
		s.remember(key, rev)
	}
	if val == nil {
		return nil, ErrNoCheckpoint
	}
	return val, nil
}

// last returns the key's revision (0: never written) and value (nil: none
// or deleted), as the stream's leader has them (lastMsg).
func (s *fencedStore) last(ctx context.Context, key string) (uint64, []byte, error) {
	rev, m, err := s.lastMsg(ctx, key)
	if err != nil || m == nil {
		return rev, nil, err
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return rev, nil, nil
	}
	if m.Data == nil {
		return rev, []byte{}, nil
	}
	return rev, m.Data, nil
}

// lastMsg returns the key's revision and last message (0 and nil: never
// written), as the stream's leader has them (wire.LeaderLast: a lagging
// replica's checkpoint is older than the one that let the partition's acks
// advance, and its revision older than the key's).
func (s *fencedStore) lastMsg(ctx context.Context, key string) (uint64, *wire.StoredMsg, error) {
	m, err := wire.LeaderLast(ctx, s.js.Conn(), s.api, s.streamName, s.prefix+key)
	if errors.Is(err, wire.ErrNoStoredMsg) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return m.Seq, m, nil
}

func (s *fencedStore) remember(key string, rev uint64) {
	s.mu.Lock() // Gets of different keys run at once (shard.preload)
	defer s.mu.Unlock()
	s.revs[key] = rev
	delete(s.unsure, key)
}

// forget drops what the store knows of key: its thread is not hot (evicted,
// or only read), and is read again (Get) before it is written again.
func (s *fencedStore) forget(key string) {
	delete(s.revs, key)
	delete(s.unsure, key)
}

// Put writes key conditionally on the revision last seen. When the last
// write's outcome is unknown, it first reads the key back (bounded by ctx):
// see fencedStore. A key this store never read nor wrote is read back too
// (the shard always reads a thread's checkpoint before writing it).
func (s *fencedStore) Put(ctx context.Context, key string, value []byte, meta nats.Header) (PutFuture, error) {
	if !fenced(key) {
		return s.kvStore.Put(ctx, key, value, meta)
	}
	if s.fencedErr != nil {
		return nil, s.fencedErr
	}
	rev, ok := s.revs[key]
	if !ok {
		r, err := s.readBack(ctx, key)
		if err != nil {
			return nil, err
		}
		rev = r
	}
	s.writes++
	id := s.writer + "." + strconv.FormatUint(s.writes, 10)
	h := nats.Header{jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(rev, 10)}, ckptWriterHeader: {id}}
	for k, v := range meta { // meta is the caller's: copied, never changed
		h[k] = v
	}
	msg := &nats.Msg{Subject: s.pub + key, Data: value, Header: h}
	f, err := s.js.PublishMsgAsync(msg)
	if err != nil {
		return nil, err // not sent: the revision is still rev
	}
	// Until the outcome is known, the revision is not (fencedFuture).
	delete(s.revs, key)
	s.unsure[key] = unsureWrite{prev: rev, id: id}
	return &fencedFuture{s: s, key: key, f: f}, nil
}

// readBack returns the revision key's next write must expect, when the
// store does not know it: the key's last message on the stream's leader
// must be the one the store knew (the unsure write was not stored) or the
// unsure write itself; anything else fences the store. With no unsure
// write (a key never read nor written), the key's revision as it is.
func (s *fencedStore) readBack(ctx context.Context, key string) (uint64, error) {
	rev, m, err := s.lastMsg(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("pipeline: checkpoint revision of %s: %w", key, err)
	}
	u, ok := s.unsure[key]
	if !ok {
		return rev, nil
	}
	if rev == u.prev || (m != nil && m.Header.Get(ckptWriterHeader) == u.id) {
		s.remember(key, rev)
		return rev, nil
	}
	s.fence(fmt.Errorf("%w (key %s): written by another writer (revision %d) after this store's write of unknown outcome, which expected %d",
		ErrFenced, key, rev, u.prev))
	return 0, s.fencedErr
}

// fence records the store's first refused write and reports it.
func (s *fencedStore) fence(err error) {
	if s.fencedErr != nil {
		return
	}
	s.fencedErr = err
	if s.onFence != nil {
		s.onFence(ErrFenced)
	}
}

// fencedFuture records the outcome of a conditional write: the new revision,
// or the fence.
type fencedFuture struct {
	s    *fencedStore
	key  string
	f    jetstream.PubAckFuture
	done bool
	err  error
}

func (k *fencedFuture) settle(ack *jetstream.PubAck, err error) {
	k.done = true
	switch {
	case err == nil:
		k.s.remember(k.key, ack.Sequence)
	case isWrongLastSeq(err):
		k.err = fmt.Errorf("%w (key %s): %w", ErrFenced, k.key, err)
		k.s.fence(k.err)
	default:
		// Stored or not: unknown (unsure, read back by the next Put).
		k.err = err
	}
}

func (k *fencedFuture) Result() (bool, error) {
	if !k.done {
		select {
		case ack := <-k.f.Ok():
			k.settle(ack, nil)
		case err := <-k.f.Err():
			k.settle(nil, err)
		default:
		}
	}
	return k.done, k.err
}

func (k *fencedFuture) Wait(ctx context.Context) error {
	if !k.done {
		select {
		case ack := <-k.f.Ok():
			k.settle(ack, nil)
		case err := <-k.f.Err():
			k.settle(nil, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return k.err
}

// apiPrefix is the prefix of the JetStream API subjects of opts (what
// jetstream uses for its own requests).
func apiPrefix(opts jetstream.JetStreamOptions) string {
	switch {
	case opts.Domain != "":
		return "$JS." + opts.Domain + ".API."
	case opts.APIPrefix != "":
		return strings.TrimSuffix(opts.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// newJetStream returns the JetStream context of cfg's domain.
func newJetStream(nc *nats.Conn, domain string, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	if domain != "" {
		return jetstream.NewWithDomain(nc, domain, opts...)
	}
	return jetstream.New(nc, opts...)
}
