package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

func newPublisher(t testing.TB, env *testEnv, cfg agent.Config) *agent.Publisher {
	t.Helper()
	p, err := agent.New(env.nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func withLinger(d time.Duration) agent.Config {
	cfg := agent.DefaultConfig()
	cfg.Linger = d
	return cfg
}

// TestPublishKeepsThreadOrder publishes several threads concurrently, each
// from its own goroutine, and checks that the stream holds every event of
// every thread exactly once and in publish order, with and without batching.
func TestPublishKeepsThreadOrder(t *testing.T) {
	lossy := func(linger time.Duration) agent.Config {
		cfg := withLinger(linger)
		cfg.RetryWait, cfg.MaxRetries = time.Millisecond, 100
		return cfg
	}
	tests := []struct {
		name         string
		give         agent.Config
		dropAcks     int32 // acks "lost", so that their messages are retried
		wantBatching bool
	}{
		{name: "linger 0 (one event per message)", give: withLinger(0)},
		{name: "linger 2ms (batches)", give: withLinger(2 * time.Millisecond), wantBatching: true},
		{name: "linger 0, lost acks", give: lossy(0), dropAcks: 40},
		{name: "linger 2ms, lost acks", give: lossy(2 * time.Millisecond), dropAcks: 40, wantBatching: true},
	}
	const threads, perThread = 8, 300
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := startJS(t, false)
			p := newPublisher(t, env, tt.give)
			p.DropNextAcks(tt.dropAcks)
			ctx := testCtx(t)

			futs := make([][]*agent.Future, threads)
			var wg sync.WaitGroup
			for th := range threads {
				wg.Go(func() {
					for i := range perThread {
						f, err := p.Publish(ctx, "acme", "thread-"+strconv.Itoa(th), contentEvent("m", i))
						if err != nil {
							t.Errorf("thread %d event %d: %v", th, i, err)
							return
						}
						futs[th] = append(futs[th], f)
					}
				})
			}
			wg.Wait()
			acks := map[string]agent.Ack{} // "seq/index" → thread-event
			for th := range threads {
				for i, f := range futs[th] {
					ack, err := f.Wait(ctx)
					if err != nil {
						t.Fatalf("thread %d event %d: %v", th, i, err)
					}
					if ack.Stream != wire.DefaultStream || ack.Seq == 0 || ack.Duplicate && tt.dropAcks == 0 {
						t.Fatalf("thread %d event %d: ack %+v", th, i, ack)
					}
					acks[fmt.Sprintf("%d/%d", ack.Seq, ack.Index)] = agent.Ack{Seq: uint64(th), Index: i}
				}
			}

			next := make([]int, threads)
			msgs := readStream(t, env.js)
			batched := false
			for _, m := range msgs {
				if m.tenant != "acme" {
					t.Fatalf("seq %d: tenant %q", m.seq, m.tenant)
				}
				th, err := strconv.Atoi(m.thread[len("thread-"):])
				if err != nil {
					t.Fatal(err)
				}
				if n := len(m.events); n > 1 {
					batched = true
					if h := m.header.Get(wire.HeaderBatch); h != strconv.Itoa(n) {
						t.Fatalf("seq %d: %d events, %s header %q", m.seq, n, wire.HeaderBatch, h)
					}
				} else if h := m.header.Get(wire.HeaderBatch); h != "" {
					t.Fatalf("seq %d: single event with %s %q", m.seq, wire.HeaderBatch, h)
				}
				if m.header.Get(wire.HeaderMsgID) == "" {
					t.Fatalf("seq %d: no %s", m.seq, wire.HeaderMsgID)
				}
				for idx, ev := range m.events {
					want := string(contentEvent("m", next[th]))
					if string(ev) != want {
						t.Fatalf("thread %d: event %d is %s, want %s", th, next[th], ev, want)
					}
					if a := acks[fmt.Sprintf("%d/%d", m.seq, idx)]; a.Seq != uint64(th) || a.Index != next[th] {
						t.Fatalf("seq %d index %d holds thread %d event %d, its ack says %+v", m.seq, idx, th, next[th], a)
					}
					next[th]++
				}
			}
			for th, n := range next {
				if n != perThread {
					t.Errorf("thread %d: %d events stored, want %d", th, n, perThread)
				}
			}
			if batched != tt.wantBatching {
				t.Errorf("batched = %v, want %v (%d messages for %d events)", batched, tt.wantBatching, len(msgs), threads*perThread)
			}
			st := p.Stats()
			if st.Accepted != threads*perThread || st.Acked != threads*perThread || st.Failed != 0 || st.Pending != 0 ||
				st.Messages != uint64(len(msgs)) || st.Retries != uint64(tt.dropAcks) {
				t.Errorf("stats %+v, want %d accepted and acked in %d messages, %d retries",
					st, threads*perThread, len(msgs), tt.dropAcks)
			}
			// A retry's own ack can be dropped too, so several retries may end
			// in one duplicate ack: between 1 and dropAcks of them.
			if tt.dropAcks > 0 && (st.Duplicates == 0 || st.Duplicates > uint64(tt.dropAcks)) || tt.dropAcks == 0 && st.Duplicates != 0 {
				t.Errorf("%d duplicate acks for %d dropped acks", st.Duplicates, tt.dropAcks)
			}
		})
	}
}

// TestBatchLimits checks that no message exceeds MaxBatchEvents or
// MaxBatchBytes, and that an event that alone exceeds the byte limit is still
// sent (alone). Only the first batch has a fixed size: later ones leave as
// soon as the previous ack arrives, with whatever has queued by then.
func TestBatchLimits(t *testing.T) {
	big := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + string(make160('x')) + `"}`)
	tests := []struct {
		name      string
		maxEvents int
		maxBytes  int
		give      [][]byte
		wantFirst int // events in the first message
		wantMax   int // events in any message
	}{
		{name: "by count", maxEvents: 10, maxBytes: 1 << 20, give: repeat(contentEvent("m", 1), 25), wantFirst: 10, wantMax: 10},
		{name: "by bytes", maxEvents: 100, maxBytes: 3*len(contentEvent("m", 1)) + 2, give: repeat(contentEvent("m", 1), 7), wantFirst: 3, wantMax: 3},
		{name: "oversized event alone", maxEvents: 100, maxBytes: 100, give: [][]byte{contentEvent("m", 1), big, contentEvent("m", 2)}, wantFirst: 1, wantMax: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := startJS(t, false)
			cfg := withLinger(time.Hour) // nothing leaves before a batch is full or Flush
			cfg.MaxBatchEvents, cfg.MaxBatchBytes = tt.maxEvents, tt.maxBytes
			p := newPublisher(t, env, cfg)
			ctx := testCtx(t)
			for i, ev := range tt.give {
				if _, err := p.Publish(ctx, "acme", "t", ev); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			total := 0
			for i, m := range readStream(t, env.js) {
				sizes = append(sizes, len(m.events))
				total += len(m.events)
				for j, ev := range m.events {
					if !bytes.Equal(ev, tt.give[total-len(m.events)+j]) {
						t.Fatalf("message %d event %d: %s", i, j, ev)
					}
				}
			}
			bad := len(sizes) == 0 || sizes[0] != tt.wantFirst || total != len(tt.give)
			for _, n := range sizes {
				bad = bad || n > tt.wantMax
			}
			if bad {
				t.Errorf("events per message %v: want %d first, at most %d each, %d in all", sizes, tt.wantFirst, tt.wantMax, len(tt.give))
			}
		})
	}
}

func make160(c byte) []byte {
	b := make([]byte, 160)
	for i := range b {
		b[i] = c
	}
	return b
}

func repeat(ev []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = ev
	}
	return out
}

// TestInvalidEventsRejected: an invalid event gets its error from Publish,
// nothing is sent for it, and the valid events around it are published.
func TestInvalidEventsRejected(t *testing.T) {
	tests := []struct {
		name     string
		give     string
		wantKind codec.Kind
	}{
		{name: "not JSON", give: `{"type":"TEXT_MESSAGE_CONTENT",`, wantKind: codec.KindSyntax},
		{name: "unknown type", give: `{"type":"TEXT_MESSAGE_CONTNET","messageId":"m","delta":"x"}`, wantKind: codec.KindUnknownType},
		{name: "missing messageId", give: `{"type":"TEXT_MESSAGE_CONTENT","delta":"x"}`, wantKind: codec.KindMissingField},
		{name: "wrong type", give: `{"type":"TEXT_MESSAGE_CONTENT","messageId":7,"delta":"x"}`, wantKind: codec.KindWrongType},
	}
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(time.Millisecond))
	ctx := testCtx(t)
	var futs []*agent.Future
	for i, tt := range tests {
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
		f, err = p.Publish(ctx, "acme", "t", []byte(tt.give))
		var cerr *codec.Error
		switch {
		case f != nil:
			t.Errorf("%s: got a future for an invalid event", tt.name)
		case !errors.Is(err, agent.ErrInvalid):
			t.Errorf("%s: error %v, want ErrInvalid", tt.name, err)
		case !errors.As(err, &cerr) || cerr.Kind != tt.wantKind:
			t.Errorf("%s: error %v, want codec kind %v", tt.name, err, tt.wantKind)
		}
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, m := range readStream(t, env.js) {
		for _, ev := range m.events {
			got = append(got, string(ev))
		}
	}
	if len(got) != len(tests) {
		t.Fatalf("stored %d events, want the %d valid ones: %q", len(got), len(tests), got)
	}
	for i, ev := range got {
		if ev != string(contentEvent("m", i)) {
			t.Errorf("event %d: %s", i, ev)
		}
	}
	if st := p.Stats(); st.Rejected != uint64(len(tests)) || st.Accepted != uint64(len(tests)) {
		t.Errorf("stats %+v: want %d rejected, %d accepted", st, len(tests), len(tests))
	}
}

// TestPublishArgumentErrors covers the errors Publish returns before
// queueing anything.
func TestPublishArgumentErrors(t *testing.T) {
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(0))
	ctx := testCtx(t)
	huge := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + string(make([]byte, 0, 0)) + string(bytesOf('y', int(env.nc.MaxPayload()))) + `"}`)
	tests := []struct {
		name           string
		tenant, thread string
		event          []byte
		want           error
	}{
		{name: "upper-case tenant", tenant: "Acme", thread: "t", event: contentEvent("m", 1), want: agent.ErrBadTenant},
		{name: "tenant with a dot", tenant: "a.b", thread: "t", event: contentEvent("m", 1), want: agent.ErrBadTenant},
		{name: "empty tenant", tenant: "", thread: "t", event: contentEvent("m", 1), want: agent.ErrBadTenant},
		{name: "thread too long", tenant: "acme", thread: string(bytesOf('t', 1025)), event: contentEvent("m", 1), want: agent.ErrBadThread},
		{name: "event over max payload", tenant: "acme", thread: "t", event: huge, want: agent.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := p.Publish(ctx, tt.tenant, tt.thread, tt.event)
			if f != nil || !errors.Is(err, tt.want) {
				t.Errorf("Publish = %v, %v; want %v", f, err, tt.want)
			}
		})
	}
	if n := p.Stats().Accepted; n != 0 {
		t.Errorf("accepted %d events", n)
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// TestHostileThreadIDs: thread ids that would break a raw subject are
// encoded exactly as pipeline encodes them, and come back intact.
func TestHostileThreadIDs(t *testing.T) {
	ids := []string{"a.b", "*", ">", "a b", "ünïcödé", "=abc", "a/b\\c", "x.*.>", "\x00\n\t"}
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(0))
	ctx := testCtx(t)
	for _, id := range ids {
		f, err := p.Publish(ctx, "acme", id, contentEvent("m", 1))
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("%q: %v", id, err)
		}
	}
	msgs := readStream(t, env.js)
	if len(msgs) != len(ids) {
		t.Fatalf("%d messages, want %d", len(msgs), len(ids))
	}
	for i, m := range msgs {
		if m.thread != ids[i] {
			t.Errorf("message %d: thread %q, want %q", i, m.thread, ids[i])
		}
	}
}

// TestRefusedThreadIDs: an id no thread may have (empty, not UTF-8) is
// refused by Publish at once, with ErrBadThread, and nothing is stored.
func TestRefusedThreadIDs(t *testing.T) {
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(0))
	ctx := testCtx(t)
	for _, id := range []string{"", "\xff\xfe", "ok\xc3"} {
		if _, err := p.Publish(ctx, "acme", id, contentEvent("m", 1)); !errors.Is(err, agent.ErrBadThread) {
			t.Errorf("Publish(%q) = %v, want ErrBadThread", id, err)
		}
	}
	if msgs := readStream(t, env.js); len(msgs) != 0 {
		t.Errorf("%d messages stored, want none", len(msgs))
	}
}

// TestSubjectMatchesPipeline pins agent.Subject to wire.EventSubject.
func TestSubjectMatchesPipeline(t *testing.T) {
	tests := []struct{ tenant, thread string }{
		{"acme", "thread-1"}, {"acme", "a.b"}, {"acme", "*"}, {"acme", ">"}, {"acme", ""},
		{"acme", "ünï"}, {"acme", "\xff"}, {"acme", "=x"}, {"a-b_c", "T_1-x"}, {"0", "a b"},
		{"Acme", "t"}, {"-a", "t"}, {"a.b", "t"}, {"", "t"}, {string(bytesOf('a', 64)), "t"},
		{"acme", string(bytesOf('z', 1024))}, {"acme", string(bytesOf('z', 1025))},
	}
	for _, tt := range tests {
		got, gerr := agent.Subject(tt.tenant, tt.thread)
		want, werr := wire.EventSubject(tt.tenant, tt.thread)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Errorf("Subject(%q, %.20q) = %q, %v; pipeline says %q, %v", tt.tenant, tt.thread, got, gerr, want, werr)
		}
	}
}

// TestRetryAfterLostAckIsStoredOnce: the first ack is "lost" (the message is
// stored, the ack reported as a timeout); the retry carries the same
// Nats-Msg-Id, the server recognises the duplicate, and the stream holds the
// event once.
func TestRetryAfterLostAckIsStoredOnce(t *testing.T) {
	env := startJS(t, false)
	cfg := withLinger(0)
	cfg.RetryWait = time.Millisecond
	p := newPublisher(t, env, cfg)
	p.DropNextAcks(1)
	ctx := testCtx(t)
	f, err := p.Publish(ctx, "acme", "t", contentEvent("m", 1))
	if err != nil {
		t.Fatal(err)
	}
	ack, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Duplicate || ack.Seq != 1 {
		t.Errorf("ack %+v, want the duplicate ack of seq 1", ack)
	}
	f2, err := p.Publish(ctx, "acme", "t", contentEvent("m", 2))
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := f2.Wait(ctx); err != nil || ack.Seq != 2 || ack.Duplicate {
		t.Errorf("next event: %+v, %v", ack, err)
	}
	if n := streamCount(t, env.js); n != 2 {
		t.Errorf("stream holds %d messages, want 2", n)
	}
	if st := p.Stats(); st.Retries != 1 || st.Duplicates != 1 || st.Messages != 2 || st.Acked != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestServerDeduplicatesMsgID: what the retry relies on — two messages with
// one Nats-Msg-Id inside the stream's duplicate window are stored once. Two
// Publishers given the same ID collide exactly so (hence Config.ID's rule).
func TestServerDeduplicatesMsgID(t *testing.T) {
	env := startJS(t, false)
	ctx := testCtx(t)
	cfg := withLinger(0)
	cfg.ID = "same"
	var acks []agent.Ack
	for i := range 2 {
		p := newPublisher(t, env, cfg)
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		ack, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack)
	}
	if acks[0].Duplicate || !acks[1].Duplicate || acks[1].Seq != acks[0].Seq {
		t.Errorf("acks %+v: want the second to be a duplicate of the first", acks)
	}
	if n := streamCount(t, env.js); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

// TestPublishFailures: a refused message fails at once (no retry); a missing
// stream is retried, then fails; later events of the thread still go out.
func TestPublishFailures(t *testing.T) {
	t.Run("refused by the stream", func(t *testing.T) {
		env := startJS(t, true)
		ctx := testCtx(t)
		cfg := pipeline.DefaultConfig()
		sc := pipeline.StreamConfig(&cfg)
		sc.MaxMsgSize = 300
		if _, err := env.js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
		p := newPublisher(t, env, withLinger(0))
		f, err := p.Publish(ctx, "acme", "t", []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"`+string(bytesOf('x', 400))+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Wait(ctx)
		var apiErr *jetstream.APIError
		if !errors.Is(err, agent.ErrPublish) || !errors.As(err, &apiErr) {
			t.Fatalf("error %v, want ErrPublish wrapping a JetStream API error", err)
		}
		f, err = p.Publish(ctx, "acme", "t", contentEvent("m", 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			t.Errorf("next event: %v", err)
		}
		if st := p.Stats(); st.Retries != 0 || st.Failed != 1 || st.Acked != 1 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("no stream", func(t *testing.T) {
		env := startJS(t, true)
		ctx := testCtx(t)
		cfg := withLinger(0)
		cfg.MaxRetries, cfg.RetryWait = 1, time.Millisecond
		p := newPublisher(t, env, cfg)
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(ctx); !errors.Is(err, agent.ErrPublish) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("error %v, want ErrPublish wrapping ErrNoStreamResponse", err)
		}
		if st := p.Stats(); st.Retries != 1 || st.Failed != 1 || st.Pending != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestRetryable pins which failures are re-sent (lost in transit: the
// server may have stored the message, the same Nats-Msg-Id makes the resend
// safe) and which resolve the future at once (refused, or never sent).
func TestRetryable(t *testing.T) {
	reset := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	pipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{pipe, true}, // a server restart, seen by the flush of the write buffer
		{reset, true},
		{fmt.Errorf("wrapped: %w", pipe), true},
		{io.EOF, true},
		{nats.ErrStaleConnection, true},
		{nats.ErrDisconnected, true},
		{nats.ErrReconnectBufExceeded, true},
		{nats.ErrTimeout, true},
		{jetstream.ErrAsyncPublishTimeout, true},
		{jetstream.ErrNoStreamResponse, true},
		{nats.ErrNoResponders, true},
		{nats.ErrMaxPayload, false},
		{nats.ErrBadSubject, false},
		{nats.ErrConnectionClosed, false}, // closed by us: no reconnect is coming
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest}, false},
		// A clustered stream still replicating an earlier attempt of the same
		// Nats-Msg-Id: the resend is answered as a duplicate once it is stored.
		{&jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}, true},
		{fmt.Errorf("ack: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158}), true},
		// No stream leader, as during an election.
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "write failed: no space left on device"}, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false}, // a net.Error, but the caller's deadline
		{fmt.Errorf("publish: %w", context.DeadlineExceeded), false},
		{os.ErrDeadlineExceeded, true}, // a socket write deadline (nats.go's flusher timeout)
		{net.ErrClosed, true},          // the old connection, closed by a reconnect
		{&net.DNSError{Err: "no such host", Name: "nats"}, false},
	} {
		if got := agent.Retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestOverflow covers both named overflow policies.
func TestOverflow(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		env := startJS(t, false)
		cfg := withLinger(time.Hour)
		cfg.MaxPending, cfg.Overflow = 2, agent.OverflowError
		p := newPublisher(t, env, cfg)
		ctx := testCtx(t)
		for i := range 2 {
			if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", 3)); !errors.Is(err, agent.ErrOverflow) {
			t.Fatalf("third event: %v, want ErrOverflow", err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", 3)); err != nil {
			t.Fatalf("after Flush: %v", err)
		}
		if st := p.Stats(); st.OverflowErrors != 1 || st.Accepted != 3 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("block honours ctx", func(t *testing.T) {
		env := startJS(t, false)
		cfg := withLinger(time.Hour)
		cfg.MaxPending = 1
		p := newPublisher(t, env, cfg)
		ctx := testCtx(t)
		if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", 1)); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if _, err := p.Publish(short, "acme", "t", contentEvent("m", 2)); !errors.Is(err, agent.ErrOverflow) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("blocked Publish: %v, want ErrOverflow and DeadlineExceeded", err)
		}
		// A blocked Publish gets its slot as soon as one frees.
		done := make(chan error, 1)
		go func() {
			_, err := p.Publish(ctx, "acme", "t", contentEvent("m", 2))
			done <- err
		}()
		testsupport.WaitFor(t, 5*time.Second, "the second Publish to wait", func() bool { return p.Stats().OverflowWaits == 2 })
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseDrains: Close sends what is lingering and waits for the acks;
// afterwards Publish refuses and Close is a no-op.
func TestCloseDrains(t *testing.T) {
	env := startJS(t, false)
	p, err := agent.New(env.nc, withLinger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var futs []*agent.Future
	for i := range 100 {
		f, err := p.Publish(ctx, "acme", "t"+strconv.Itoa(i%7), contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, f := range futs {
		select {
		case <-f.Done():
		default:
			t.Fatalf("event %d unresolved after Close", i)
		}
		if _, err := f.Result(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	total := 0
	for _, m := range readStream(t, env.js) {
		total += len(m.events)
	}
	if total != 100 {
		t.Errorf("stored %d events, want 100", total)
	}
	if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", 1)); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Publish after Close: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseAbandonsAtDeadline: when acks cannot come (no stream, endless
// retries), Close gives up at its ctx deadline and resolves everything.
func TestCloseAbandonsAtDeadline(t *testing.T) {
	env := startJS(t, true)
	cfg := withLinger(0)
	cfg.MaxRetries, cfg.RetryWait = 1000, time.Millisecond
	p, err := agent.New(env.nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var futs []*agent.Future
	for i := range 5 {
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want DeadlineExceeded", err)
	}
	for i, f := range futs {
		if _, err := f.Wait(ctx); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("event %d: %v, want ErrClosed", i, err)
		}
	}
	if st := p.Stats(); st.Pending != 0 || st.Failed != 5 {
		t.Errorf("stats %+v", st)
	}
}

// TestCloseDrainedWithEndedCtx: a Flush or Close that has nothing left to
// wait for returns nil even when its ctx has already ended: nothing was
// abandoned.
func TestCloseDrainedWithEndedCtx(t *testing.T) {
	env := startJS(t, false)
	ctx := testCtx(t)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 20 {
		p, err := agent.New(env.nc, withLinger(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ended); err != nil {
			t.Fatalf("Flush %d with everything acked: %v, want nil", i, err)
		}
		if err := p.Close(ended); err != nil {
			t.Fatalf("Close %d with everything acked: %v, want nil", i, err)
		}
	}
}

// TestNoGoroutineLeak: after Close and closing the connection, nothing the
// Publisher started is left running.
func TestNoGoroutineLeak(t *testing.T) {
	base := testsupport.CountGoroutines()
	func() {
		env := startJS(t, false)
		p, err := agent.New(env.nc, withLinger(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		for i := range 50 {
			if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		env.nc.Close()
		env.srv.Stop()
	}()
	base.Exited(t)
}

// TestCloseLeavesConnectionClean: Publishers that come and go on a
// connection that stays open (the caller's) leave no subscription and no
// goroutine on it once closed.
func TestCloseLeavesConnectionClean(t *testing.T) {
	env := startJS(t, false)
	ctx := testCtx(t)
	subs := env.nc.NumSubscriptions()
	base := testsupport.CountGoroutines()
	for i := range 3 {
		p, err := agent.New(env.nc, withLinger(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := env.nc.NumSubscriptions(); n != subs {
		t.Errorf("%d subscriptions on the connection after Close, want %d", n, subs)
	}
	base.Exited(t)
}

// TestRetriedBatchIsStoredOnce: a whole batch whose ack is lost is re-sent as
// the same message; every event of it reports the duplicate ack.
func TestRetriedBatchIsStoredOnce(t *testing.T) {
	env := startJS(t, false)
	cfg := withLinger(time.Hour)
	cfg.RetryWait = time.Millisecond
	p := newPublisher(t, env, cfg)
	p.DropNextAcks(1)
	ctx := testCtx(t)
	var futs []*agent.Future
	for i := range 5 {
		f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, f := range futs {
		if ack, err := f.Result(); err != nil || !ack.Duplicate || ack.Seq != 1 || ack.Index != i {
			t.Errorf("event %d: %+v, %v; want the duplicate ack of seq 1, index %d", i, ack, err, i)
		}
	}
	msgs := readStream(t, env.js)
	if len(msgs) != 1 || len(msgs[0].events) != 5 {
		t.Fatalf("stream holds %d messages, want 1 batch of 5", len(msgs))
	}
}

// TestFlush: Flush returns once every earlier event is resolved, whatever
// the linger; it gives up at its ctx's end when acks cannot come.
func TestFlush(t *testing.T) {
	t.Run("waits for earlier events", func(t *testing.T) {
		env := startJS(t, false)
		p := newPublisher(t, env, withLinger(time.Hour))
		ctx := testCtx(t)
		var futs []*agent.Future
		for i := range 50 {
			f, err := p.Publish(ctx, "acme", "t"+strconv.Itoa(i%5), contentEvent("m", i))
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for i, f := range futs {
			select {
			case <-f.Done():
			default:
				t.Fatalf("event %d unresolved after Flush", i)
			}
		}
		if err := p.Flush(ctx); err != nil { // nothing pending: returns at once
			t.Fatal(err)
		}
	})
	t.Run("gives up at ctx end", func(t *testing.T) {
		env := startJS(t, true)
		cfg := withLinger(0)
		cfg.MaxRetries, cfg.RetryWait = 1000, time.Millisecond
		p, err := agent.New(env.nc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		if _, err := p.Publish(ctx, "acme", "t", contentEvent("m", 1)); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if err := p.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush: %v, want DeadlineExceeded", err)
		}
		short2, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel2()
		if err := p.Close(short2); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close: %v, want DeadlineExceeded", err)
		}
	})
}

// TestPublishEvent: the typed helper encodes a decoded Event and publishes
// it; the stored event equals the original. An Event that breaks a rule is
// refused like its bytes would be.
func TestPublishEvent(t *testing.T) {
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(0))
	ctx := testCtx(t)
	src := []byte(`{"type":"TOOL_CALL_START","toolCallId":"tc-1","toolCallName":"web_search","parentMessageId":"m-1","timestamp":1700000000000}`)
	var d codec.Decoder
	var ev codec.Event
	if err := d.Decode(src, &ev); err != nil {
		t.Fatal(err)
	}
	f, err := p.PublishEvent(ctx, "acme", "t", &ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := readStream(t, env.js)
	if len(msgs) != 1 || !jsonEqual(t, msgs[0].events[0], src) {
		t.Fatalf("stored %v, want %s", msgs, src)
	}
	bad := codec.Event{TypeName: "NOT_AN_EVENT"}
	if _, err := p.PublishEvent(ctx, "acme", "t", &bad); !errors.Is(err, agent.ErrInvalid) || !errors.Is(err, codec.ErrUnknownType) {
		t.Errorf("event of an unknown type: %v, want ErrInvalid and codec.ErrUnknownType", err)
	}
}

// TestStatsExcludeResolved: once an event's Future has resolved, Stats no
// longer counts it as pending, for acks and failures alike. Futures used to
// resolve before their slots were returned, so a caller woken by Wait could
// read Pending 1 for an event it held the outcome of.
func TestStatsExcludeResolved(t *testing.T) {
	for _, noStream := range []bool{false, true} {
		env := startJS(t, noStream)
		ctx := testCtx(t)
		cfg := withLinger(0)
		cfg.MaxRetries, cfg.RetryWait = 1, time.Millisecond
		p := newPublisher(t, env, cfg)
		n := 300
		if noStream {
			n = 5 // each waits about a second for its publish and its retry to find no stream
		}
		for i := range n {
			f, err := p.Publish(ctx, "acme", "t", contentEvent("m", i))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Wait(ctx)
			if noStream != (err != nil) {
				t.Fatalf("event %d (no stream %v): %v", i, noStream, err)
			}
			if st := p.Stats(); st.Pending != 0 {
				t.Fatalf("event %d (no stream %v) resolved, but stats %+v", i, noStream, st)
			}
		}
	}
}

// TestOtherThreadRefused: an event whose threadId (or input.threadId) names
// another thread than the one it is published to is refused at once with
// ErrOtherThread (an ErrInvalid), escaped spellings too; nothing is stored.
func TestOtherThreadRefused(t *testing.T) {
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(0))
	ctx := testCtx(t)
	for _, ev := range []string{
		`{"type":"RUN_STARTED","threadId":"other","runId":"r"}`,
		`{"type":"RUN_FINISHED","threadId":"other","runId":"r"}`,
		`{"type":"RUN_STARTED","thread\u0049d":"other","runId":"r"}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"other","runId":"r","messages":[]}}`,
	} {
		_, err := p.Publish(ctx, "acme", "t", []byte(ev))
		if !errors.Is(err, agent.ErrOtherThread) || !errors.Is(err, agent.ErrInvalid) {
			t.Errorf("Publish(%s) = %v, want ErrOtherThread", ev, err)
		}
	}
	f, err := p.Publish(ctx, "acme", "t", []byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[]}}`))
	if err != nil {
		t.Fatalf("the thread's own id: %v", err)
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if msgs := readStream(t, env.js); len(msgs) != 1 {
		t.Errorf("%d messages stored, want 1", len(msgs))
	}
}
