package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrFenced is the cause with which an Ingest stops when a checkpoint write
// was refused because another writer changed the thread's checkpoint since
// this instance read or wrote it: another instance owns the partition now.
var ErrFenced = errors.New("pipeline: checkpoint fenced: another instance wrote this thread")

// fencedStore is the CheckpointStore an Ingest uses: a kvStore whose thread
// checkpoint writes are conditional. Each write carries
// Nats-Expected-Last-Subject-Sequence = the revision this store last read or
// wrote for the key (0: the key must not exist), so the server refuses it if
// anyone else wrote the key in between. That is the fence of issue 8: a
// stale owner — one that lost its partition lease but has not stopped yet (a
// paused process, a slow drain) — can never overwrite the new owner's
// checkpoint, and so can never make a later replay skip events the new owner
// has not checkpointed. A refused write makes the whole Ingest stop with
// ErrFenced (onFence); its un-acked messages are replayed by the owner.
//
// Chunk keys ("_c.…", named by generation) are not fenced: a generation's
// chunks hold the same bytes whoever writes them, and only a fenced head
// makes them reachable.
//
// revs is owned by the shard goroutine that owns the store (Get, Put and the
// futures' Wait/Result all run there). It is bounded: past maxFenceRevs
// entries an arbitrary one is forgotten, and a later Put of that key first
// reads its revision back (one round trip).
type fencedStore struct {
	*kvStore
	// api and streamName address the bucket's stream KV_<bucket> (its
	// last message per subject, with its sequence) through the JetStream
	// API of the store's domain.
	api, streamName string
	revs            map[string]uint64
	onFence         func(error)
	// fencedErr is set by the first refused write: from then on every
	// fenced write fails at once (no silent re-read of the revision: this
	// instance has lost a partition and must stop, not retry).
	fencedErr error
}

const maxFenceRevs = 1 << 18

// fenceUnknown marks a key whose revision must be read back before writing.
const fenceTimeout = 10 * time.Second

func newFencedStore(ctx context.Context, js jetstream.JetStream, base *kvStore, bucket string, onFence func(error)) (*fencedStore, error) {
	if _, err := js.Stream(ctx, "KV_"+bucket); err != nil {
		return nil, fmt.Errorf("pipeline: bucket stream KV_%s: %w", bucket, err)
	}
	return &fencedStore{kvStore: base, api: apiPrefix(js.Options()), streamName: "KV_" + bucket,
		revs: make(map[string]uint64), onFence: onFence}, nil
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
// or deleted), as the stream's leader has them (leaderLast).
func (s *fencedStore) last(ctx context.Context, key string) (uint64, []byte, error) {
	m, err := leaderLast(ctx, s.js.Conn(), s.api, s.streamName, s.prefix+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return m.Sequence, nil, nil
	}
	if m.Data == nil {
		return m.Sequence, []byte{}, nil
	}
	return m.Sequence, m.Data, nil
}

// leaderReadTimeout bounds a leaderLast whose context has no deadline.
const leaderReadTimeout = 5 * time.Second

// leaderLast reads the last message of subject in stream through the
// STREAM.MSG.GET API, which only the stream's leader answers. Not through a
// direct get (what jetstream.Stream.GetLastMsgForSubject and
// KeyValue.Get use on a KV bucket, which allows them): any replica answers
// those, a follower that lags behind the leader included — a server back
// from a restart answers them once 90 % synchronized, a partitioned one
// keeps answering from what it had — and the local replica is preferred.
// A checkpoint read from such a replica is older than the one that let the
// partition's acks advance: the events between the two would never be
// applied to the view again. A revision read from it is older than the
// key's: the next conditional write would be refused as fenced although
// nobody else wrote the key.
func leaderLast(ctx context.Context, nc *nats.Conn, api, stream, subject string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok { // as jetstream bounds its own API requests
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, leaderReadTimeout)
		defer cancel()
	}
	reply, err := nc.RequestWithContext(ctx, api+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error,omitempty"`
		Message *struct {
			Subject  string `json:"subject"`
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs,omitempty"`
			Data     []byte `json:"data,omitempty"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("pipeline: stream message reply: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	m := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("pipeline: stream message headers: %w", err)
		}
	}
	return m, nil
}

func (s *fencedStore) remember(key string, rev uint64) {
	if _, ok := s.revs[key]; !ok && len(s.revs) >= maxFenceRevs {
		for k := range s.revs { // forget one: it is re-read when next written
			delete(s.revs, k)
			break
		}
	}
	s.revs[key] = rev
}

// Put writes key conditionally on the revision last seen (reading it back
// first when unknown).
func (s *fencedStore) Put(key string, value []byte, meta nats.Header) (PutFuture, error) {
	if !fenced(key) {
		return s.kvStore.Put(key, value, meta)
	}
	if s.fencedErr != nil {
		return nil, s.fencedErr
	}
	rev, ok := s.revs[key]
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), fenceTimeout)
		r, _, err := s.last(ctx, key)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("pipeline: checkpoint revision of %s: %w", key, err)
		}
		rev = r
	}
	h := nats.Header{jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(rev, 10)}}
	for k, v := range meta { // meta is the caller's: copied, never changed
		h[k] = v
	}
	msg := &nats.Msg{Subject: s.prefix + key, Data: value, Header: h}
	f, err := s.js.PublishMsgAsync(msg)
	if err != nil {
		return nil, err
	}
	// Until the outcome is known, the revision is not: a concurrent Put of
	// the same key would read it back (the shard never does that).
	delete(s.revs, key)
	return &fencedFuture{s: s, key: key, f: f}, nil
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
		k.s.fencedErr = k.err
		if k.s.onFence != nil {
			k.s.onFence(ErrFenced)
		}
	default:
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
