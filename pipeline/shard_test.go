package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testMsg is a delivered message for unit tests of the shard's bookkeeping
// (the integration tests use real consumers); it records acks.
type testMsg struct {
	jetstream.Msg // unused methods panic
	subject       string
	data          []byte
	seq           uint64
	acked         *[]uint64
}

func (m *testMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}
func (m *testMsg) Data() []byte         { return m.data }
func (m *testMsg) Headers() nats.Header { return nil }
func (m *testMsg) Subject() string      { return m.subject }
func (m *testMsg) Ack() error {
	*m.acked = append(*m.acked, m.seq)
	return nil
}

// failStore fails every Get, like an unreachable KV bucket.
type failStore struct{ memStore }

func (failStore) Get(context.Context, string) ([]byte, error) {
	return nil, errors.New("store down")
}

// TestUnappliedMessageNeverAcked: when a thread cannot be loaded during a
// hard shutdown, its message is not applied — and neither it nor any later
// message of the partition is acked, while earlier ones are.
func TestUnappliedMessageNeverAcked(t *testing.T) {
	cfg := testConfig()
	cfg.Tap = false
	mem := memStore{}
	s := newShard(0, &cfg, discardLogger(), NewMetrics(nil), &countPub{}, mem)
	ps := &partState{p: 0, dirty: make(map[*hotThread]struct{})}
	s.parts[0] = ps
	var acked []uint64
	msg := func(seq uint64, thread string) *testMsg {
		return &testMsg{subject: StoredSubject(0, "acme", thread), seq: seq, acked: &acked,
			data: []byte(`{"type":"RUN_STARTED","threadId":"x","runId":"r"}`)}
	}
	ctx := context.Background()
	s.now = time.Now()
	s.handle(ctx, msg(1, "a"))
	s.flush(ctx, true) // checkpointed and acked
	if len(acked) != 1 || acked[0] != 1 {
		t.Fatalf("acked %v, want [1]", acked)
	}

	dead, cancel := context.WithCancel(ctx)
	cancel()
	s.store = failStore{mem}
	s.handle(dead, msg(2, "b")) // cannot load b: not applied
	s.store = mem
	s.handle(ctx, msg(3, "a")) // a is hot: applied
	s.flush(ctx, true)
	if len(acked) != 1 {
		t.Errorf("acked %v after an unapplied message, want only [1]", acked)
	}
	if _, hot := s.threads[threadKey{"acme", "b"}]; hot {
		t.Error("thread b was created without its checkpoint")
	}
}
