package agent

// NOTE: structure of this file. Publish validates in the caller's goroutine,
// takes a slot of the MaxPending budget, and appends the event to its
// thread's queue (thread.buf, JSONL; push). A thread is in one of four
// places: idle (nothing queued), lingering (in p.timers until its oldest
// event has waited Linger), ready (in p.ready), or in flight (exactly one
// message awaiting its ack; what arrives meanwhile queues behind it). take
// turns the head of a queue into a message. Three places do that and hand
// the message to JetStream's async publisher: the run goroutine (threads
// that lingered or filled a batch, and retries, which wait in p.timers too),
// Publish itself (Linger 0 and the thread idle), and onAck (what queued
// behind the acked message). Acks and errors come back on nats.go's
// goroutines through onAck/onErr, which resolve the futures.
//
// Lock: p.mu guards every field below it in Publisher, every thread and
// every message. It is never held while calling into nats.go (publish), and
// nats.go calls onAck/onErr without holding anything we take, so the only
// order is nats.go's locks → p.mu (onErr runs under the JetStream publisher's
// lock on an ack timeout, which is why it never publishes: retries and the
// queue behind a failed message go through run).

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/threadcast/threadcast/codec"
)

// Header names shared with pipeline (wire.HeaderBatch, HeaderMsgID).
const (
	headerBatch = "Threadcast-Batch"
	headerMsgID = jetstream.MsgIDHeader // "Nats-Msg-Id"
)

// headerRoom is the part of the server's max payload kept for our headers.
const headerRoom = 512

// maxRetryWait caps the doubling retry backoff.
const maxRetryWait = 2 * time.Second

// JetStream API error codes (nats-server's JSStreamDuplicateMessageConflict
// and JSClusterNotAvailErr) that mean "not now" rather than "no".
const (
	jsErrDuplicateInProcess  jetstream.ErrorCode = 10158
	jsErrClusterNotAvailable jetstream.ErrorCode = 10008
)

// Publisher publishes AG-UI events of many threads to JetStream. See the
// package documentation for the ordering, ack and concurrency contracts.
type Publisher struct {
	cfg        Config
	js         jetstream.JetStream
	maxPayload int

	// slots is the MaxPending budget: a token is sent per accepted event and
	// received back when its future resolves.
	slots chan struct{}
	// wake signals the run goroutine (capacity 1: a signal, not a queue).
	wake    chan struct{}
	closing chan struct{} // closed when Close starts: stops intake
	stop    chan struct{} // closed when Close ends: stops run
	done    chan struct{} // closed by run when it returns

	ctr counters

	// testDropAcks, set only by tests (export_test.go), turns the next n
	// acks into ack timeouts, as if they had been lost on the way back.
	testDropAcks atomic.Int32

	mu       sync.Mutex
	threads  map[threadKey]*thread
	ready    []*thread
	timers   timerHeap
	inflight map[*nats.Msg]*message
	msgSeq   uint64
	// gen is the current flush generation and genPending counts the
	// unresolved events of each generation; Flush waits for older ones.
	gen        uint64
	genPending map[uint64]int
	flushers   []flusher
	isClosing  bool
	closeOnce  sync.Once
}

type threadKey struct{ tenant, thread string }

// thread is one (tenant, thread)'s queue. Invariants: inflight != nil ⇒ not
// in ready and not lingering; len(items) == 0 ⇒ not in ready; a thread with
// nothing queued and nothing in flight is removed from p.threads.
type thread struct {
	key     threadKey
	subject string
	buf     []byte // queued events, each followed by '\n'
	items   []item // one per queued event; item.end is its end in buf (after the '\n')
	// first is the index in items, and off the offset in buf, of the oldest
	// queued event: what take sent is dropped lazily (compact).
	first, off int
	// bufHint and itemsHint are the sizes of the last batch: the next
	// buffers start that big instead of growing by doubling again (a busy
	// thread's batches are alike; BenchmarkPublish/linger=2ms B/op).
	bufHint, itemsHint int
	firstAt            time.Time
	inflight           *message
	inReady            bool
	// lingerAt is the deadline of this thread's live entry in p.timers, zero
	// when it has none (entries with another deadline are stale).
	lingerAt time.Time
	flush    bool // send now regardless of Linger (Flush, Close)
}

// push appends a copy of event, as one JSONL line, to th's queue.
func (th *thread) push(event []byte, it item) {
	if th.buf == nil && th.bufHint > 0 {
		th.buf = make([]byte, 0, max(th.bufHint, len(event)+1))
		th.items = make([]item, 0, th.itemsHint)
	}
	start := len(th.buf)
	th.buf = append(th.buf, event...)
	sanitize(th.buf[start:])
	th.buf = append(th.buf, '\n')
	it.end = len(th.buf)
	th.items = append(th.items, it)
}

// queued returns the events waiting in th's queue, oldest first.
func (th *thread) queued() []item { return th.items[th.first:] }

// queuedBytes returns the size of the queued events, '\n's included.
func (th *thread) queuedBytes() int { return len(th.buf) - th.off }

// compact drops the sent head of the queue once it is at least half of it,
// so each byte is moved O(1) times on average.
func (th *thread) compact() {
	if th.first < 64 || 2*th.first < len(th.items) {
		return
	}
	k := copy(th.items, th.items[th.first:])
	clear(th.items[k:])
	th.items = th.items[:k]
	for i := range th.items {
		th.items[i].end -= th.off
	}
	th.buf = th.buf[:copy(th.buf, th.buf[th.off:])]
	th.first, th.off = 0, 0
}

type item struct {
	end int
	fut *Future
	gen uint64
	// msgID, when set (PublishWithID), is the event's own Nats-Msg-Id: the
	// event travels alone in its message.
	msgID string
}

// message is one published NATS message and the events it carries.
type message struct {
	th       *thread
	msg      *nats.Msg
	items    []item
	attempts int // retries done so far
}

type flusher struct {
	gen uint64
	ch  chan struct{}
}

// New returns a Publisher sending on nc through its own JetStream context
// (acks are delivered to the Publisher's handlers, so it cannot share a
// caller's), and starts its goroutine. The caller keeps owning nc: Close the
// Publisher before closing nc.
func New(nc *nats.Conn, cfg Config) (*Publisher, error) {
	if nc == nil {
		return nil, errors.New("agent: nil NATS connection")
	}
	cfg = cfg.withDefaults()
	if cfg.ID == "" {
		cfg.ID = nuid.Next()
	}
	p := &Publisher{
		cfg:        cfg,
		maxPayload: int(nc.MaxPayload()),
		slots:      make(chan struct{}, cfg.MaxPending),
		wake:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		threads:    make(map[threadKey]*thread),
		inflight:   make(map[*nats.Msg]*message),
		genPending: make(map[uint64]int),
	}
	if p.maxPayload <= 0 {
		p.maxPayload = 1 << 20
	}
	// Headers count against the max payload too; leave them room.
	p.maxPayload -= headerRoom
	if p.cfg.MaxBatchBytes > p.maxPayload {
		p.cfg.MaxBatchBytes = p.maxPayload
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncAckHandler(p.onAck),
		jetstream.WithPublishAsyncErrHandler(p.onErr),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
		// Our own MaxPending bounds what is in flight (at most one message
		// per thread); JetStream's stall limit must never be the one to bite.
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending+1),
	)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	p.js = js
	go p.run()
	return p, nil
}

// Publish validates one AG-UI event (one JSON object) and queues it for the
// thread's subject. It returns an error, and sends nothing, when the event
// is invalid (ErrInvalid; ErrOtherThread when its threadId names another
// thread than threadID), too large (ErrTooLarge), the tenant or thread is
// unusable (ErrBadTenant, ErrBadThread), there is no room (ErrOverflow) or
// the Publisher is closed (ErrClosed). Otherwise the returned Future
// resolves when the event is stored or has failed.
//
// Publish copies event before it returns: the caller may reuse the buffer.
// It blocks only for room, under OverflowBlock, and at most until ctx ends.
func (p *Publisher) Publish(ctx context.Context, tenant, threadID string, event []byte) (*Future, error) {
	return p.publish(ctx, tenant, threadID, event, "")
}

// PublishWithID publishes one event as Publish does, but alone in its
// message and with msgID as its Nats-Msg-Id instead of one of the
// Publisher's own: the stream stores a message with a given id once within
// its Duplicates window, so a caller that derives msgID from what the event
// is (the HTTP bridge: tenant, thread, idempotency key and the event's index
// in the request) can send it again after a crash, from any Publisher, and
// it is stored once. The Future's Ack says Duplicate when the server had
// stored it before. msgID must not be empty.
func (p *Publisher) PublishWithID(ctx context.Context, tenant, threadID string, event []byte, msgID string) (*Future, error) {
	if msgID == "" {
		return nil, errors.New("agent: empty message id")
	}
	return p.publish(ctx, tenant, threadID, event, msgID)
}

func (p *Publisher) publish(ctx context.Context, tenant, threadID string, event []byte, msgID string) (*Future, error) {
	select {
	case <-p.closing:
		return nil, ErrClosed
	default:
	}
	if err := p.cfg.Validate(event); err != nil {
		p.ctr.rejected.Add(1)
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := otherThread(threadID, event); err != nil {
		p.ctr.rejected.Add(1)
		return nil, err
	}
	if len(event) > p.maxPayload {
		p.ctr.rejected.Add(1)
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, len(event), p.maxPayload)
	}
	key := threadKey{tenant, threadID}
	p.mu.Lock()
	th := p.threads[key]
	p.mu.Unlock()
	var subject string
	if th == nil {
		// The subject is built outside the lock, once per thread activity.
		var err error
		if subject, err = Subject(tenant, threadID); err != nil {
			return nil, err
		}
	}
	if err := p.acquire(ctx); err != nil {
		return nil, err
	}
	fut := newFuture()

	p.mu.Lock()
	if p.isClosing {
		p.mu.Unlock()
		<-p.slots
		return nil, ErrClosed
	}
	th = p.threads[key]
	if th == nil {
		if subject == "" {
			// The thread went idle since the lookup above; Subject already
			// validated these names once, so it cannot fail now.
			subject, _ = Subject(tenant, threadID)
		}
		th = &thread{key: key, subject: subject}
		p.threads[key] = th
	}
	if len(th.queued()) == 0 {
		th.firstAt = time.Now()
	}
	th.push(event, item{fut: fut, gen: p.gen, msgID: msgID})
	p.genPending[p.gen]++
	p.ctr.accepted.Add(1)
	if p.cfg.Linger == 0 && th.inflight == nil && !th.inReady {
		// Unbatched and idle: send from the caller's goroutine rather than
		// waking run for every event (BenchmarkPublish/linger=0s).
		m := p.take(th)
		p.mu.Unlock()
		if _, err := p.js.PublishMsgAsync(m.msg); err != nil {
			p.failed(m, err)
		}
		return fut, nil
	}
	p.schedule(th, th.firstAt)
	p.mu.Unlock()
	return fut, nil
}

// sanitize replaces CR and LF with spaces. In valid JSON they can only be
// insignificant whitespace (inside strings they must be escaped), so this
// keeps the event's meaning and makes it one JSONL line.
func sanitize(b []byte) {
	for {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			return
		}
		b[i] = ' '
		b = b[i+1:]
	}
}

// acquire takes one MaxPending slot, following the overflow policy.
func (p *Publisher) acquire(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	if p.cfg.Overflow == OverflowError {
		p.ctr.overflowErrors.Add(1)
		return fmt.Errorf("%w (%d pending)", ErrOverflow, p.cfg.MaxPending)
	}
	p.ctr.overflowWaits.Add(1)
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrOverflow, ctx.Err())
	case <-p.closing:
		return ErrClosed
	}
}

// schedule puts a thread with queued events and nothing in flight where it
// belongs: ready when its batch is full, flushing, unbatched or its oldest
// event (arrived at since) has lingered long enough, else in p.timers.
// Called with p.mu held.
func (p *Publisher) schedule(th *thread, since time.Time) {
	if th.inflight != nil || th.inReady || len(th.queued()) == 0 {
		return
	}
	at := since.Add(p.cfg.Linger)
	if p.cfg.Linger == 0 || th.flush || len(th.queued()) >= p.cfg.MaxBatchEvents || th.queued()[0].msgID != "" ||
		th.queuedBytes() >= p.cfg.MaxBatchBytes || !time.Now().Before(at) {
		th.lingerAt = time.Time{}
		th.inReady = true
		p.ready = append(p.ready, th)
		if len(p.ready) == 1 {
			p.signal()
		}
		return
	}
	if th.lingerAt.Equal(at) {
		return
	}
	th.lingerAt = at
	heap.Push(&p.timers, timerEntry{at: at, th: th})
	if p.timers[0].th == th {
		p.signal() // a new earliest deadline: run must re-arm its timer
	}
}

func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run is the Publisher's one goroutine: it dispatches ready threads and due
// retries until Close stops it.
func (p *Publisher) run() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var sends []*message
	for {
		p.mu.Lock()
		now := time.Now()
		for len(p.timers) > 0 && !p.timers[0].at.After(now) {
			e := heap.Pop(&p.timers).(timerEntry)
			switch {
			case e.m != nil:
				if p.inflight[e.m.msg] == e.m { // not abandoned by Close
					sends = append(sends, e.m)
				}
			case e.th.lingerAt.Equal(e.at):
				e.th.lingerAt = time.Time{}
				p.schedule(e.th, e.th.firstAt)
			}
		}
		for _, th := range p.ready {
			sends = append(sends, p.take(th))
		}
		clear(p.ready)
		p.ready = p.ready[:0]
		var next time.Duration = -1
		if len(p.timers) > 0 {
			next = p.timers[0].at.Sub(now)
		}
		p.mu.Unlock()

		for i, m := range sends {
			if _, err := p.js.PublishMsgAsync(m.msg); err != nil {
				p.failed(m, err)
			}
			sends[i] = nil
		}
		sends = sends[:0]

		if next >= 0 {
			timer.Reset(next)
		}
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.stop:
			return
		}
		timer.Stop()
	}
}

// take turns the head of th's queue (up to the batch limits) into an
// in-flight message. Called with p.mu held.
func (p *Publisher) take(th *thread) *message {
	q := th.queued()
	n, end := 0, th.off
	for n < len(q) && n < p.cfg.MaxBatchEvents {
		e := q[n].end
		if n > 0 && (e-th.off-1 > p.cfg.MaxBatchBytes || q[n].msgID != "") {
			break
		}
		if q[n].msgID != "" {
			n, end = 1, e // an event with its own id is a message of its own
			break
		}
		n, end = n+1, e
	}
	m := &message{th: th}
	// The payload is the events without the last '\n'.
	var data []byte
	switch {
	case n == len(q) && th.first == 0:
		// The common case: the whole queue is the batch; hand its buffers
		// over to the message instead of copying.
		data = th.buf[:end-1]
		m.items = th.items
		th.buf, th.items = nil, nil
		th.bufHint, th.itemsHint = end, n
	case n == len(q):
		data = bytes.Clone(th.buf[th.off : end-1])
		m.items = append([]item(nil), q...)
		clear(th.items)
		th.buf, th.items, th.first, th.off = th.buf[:0], th.items[:0], 0, 0
	default:
		// Part of the queue: advance its head rather than shifting what
		// stays (a thread with a long queue and small batches would
		// otherwise move the whole queue per message).
		data = bytes.Clone(th.buf[th.off : end-1])
		m.items = append([]item(nil), q[:n]...)
		clear(q[:n])
		th.first += n
		th.off = end
		th.compact()
		// What stays has already waited; it goes right after the ack.
		th.firstAt = time.Now()
	}
	p.msgSeq++
	id := m.items[0].msgID
	if id == "" {
		id = p.cfg.ID + "." + strconv.FormatUint(p.msgSeq, 10)
	}
	hdr := nats.Header{headerMsgID: []string{id}}
	if n > 1 {
		hdr[headerBatch] = []string{strconv.Itoa(n)}
	}
	m.msg = &nats.Msg{Subject: th.subject, Data: data, Header: hdr}
	th.inReady = false
	th.inflight = m
	if len(th.queued()) == 0 {
		th.flush = false
	}
	p.inflight[m.msg] = m
	p.ctr.messages.Add(1)
	return m
}

// onAck is JetStream's ack handler. It runs on nats.go's reply goroutine and
// must not block.
func (p *Publisher) onAck(_ jetstream.JetStream, msg *nats.Msg, ack *jetstream.PubAck) {
	if p.testDropAcks.Load() > 0 && p.testDropAcks.Add(-1) >= 0 {
		p.onErr(nil, msg, jetstream.ErrAsyncPublishTimeout)
		return
	}
	p.mu.Lock()
	m := p.inflight[msg]
	if m == nil {
		p.mu.Unlock()
		return
	}
	if ack.Duplicate {
		p.ctr.duplicates.Add(1)
	}
	p.ctr.acked.Add(uint64(len(m.items)))
	p.finish(m)
	for i, it := range m.items {
		it.fut.resolve(Ack{Stream: ack.Stream, Seq: ack.Sequence, Index: i, Duplicate: ack.Duplicate}, nil)
	}
	p.wakeFlushers()
	// The thread's queued events have waited a round trip: they go now, as
	// one batch (adaptive batching), and from here rather than through run:
	// one goroutine hand-off less per message, which is most of the cost of
	// unbatched publishing (BenchmarkPublish/linger=0s). Publishing cannot
	// stall this goroutine, which JetStream's acks need: its window is set
	// above MaxPending, and a thread has one message in flight at most.
	var next *message
	if len(m.th.queued()) > 0 {
		next = p.take(m.th)
	}
	p.mu.Unlock()
	if next != nil {
		if _, err := p.js.PublishMsgAsync(next.msg); err != nil {
			p.failed(next, err)
		}
	}
}

// onErr is JetStream's async error handler (an ack timeout, a disconnect, an
// API error in the ack, no stream). It may run under the JetStream
// publisher's lock, so it must neither block nor call into p.js: retries are
// handed to run through p.timers.
func (p *Publisher) onErr(_ jetstream.JetStream, msg *nats.Msg, err error) {
	p.mu.Lock()
	m := p.inflight[msg]
	if m == nil {
		p.mu.Unlock()
		return
	}
	if retryable(err) && m.attempts < p.cfg.MaxRetries {
		m.attempts++
		p.ctr.retries.Add(1)
		wait := p.cfg.RetryWait << (m.attempts - 1)
		if wait > maxRetryWait || wait <= 0 {
			wait = maxRetryWait
		}
		heap.Push(&p.timers, timerEntry{at: time.Now().Add(wait), m: m})
		if p.timers[0].m == m {
			p.signal()
		}
		p.mu.Unlock()
		return
	}
	p.failLocked(m, err)
	p.mu.Unlock()
}

// failed resolves m's events with err (a synchronous publish error: retried
// like an async one when retryable).
func (p *Publisher) failed(m *message, err error) { p.onErr(nil, m.msg, err) }

// failLocked resolves every event of m with err. Called with p.mu held.
func (p *Publisher) failLocked(m *message, err error) {
	p.ctr.failed.Add(uint64(len(m.items)))
	werr := fmt.Errorf("%w: %s: %w", ErrPublish, m.msg.Header.Get(headerMsgID), err)
	p.finish(m)
	for _, it := range m.items {
		it.fut.resolve(Ack{}, werr)
	}
	p.wakeFlushers()
	// What queued behind the failed message goes now, through run (this may
	// be JetStream's timeout callback, which must not publish).
	p.schedule(m.th, time.Time{})
}

// finish retires a message whose events are being resolved: its slots and
// generations are released and its thread, if it has nothing queued, is
// dropped. A thread with queued events is left for the caller to send. The
// caller resolves the events after finish, so that Stats never counts a
// resolved event as pending, and then wakes the flushers, so that Flush
// never returns before they are resolved. Called with p.mu held.
func (p *Publisher) finish(m *message) {
	delete(p.inflight, m.msg)
	p.release(m.items)
	th := m.th
	th.inflight = nil
	if len(th.queued()) == 0 && !th.inReady && th.lingerAt.IsZero() && p.threads[th.key] == th {
		delete(p.threads, th.key)
	}
}

// release returns the slots of events being resolved and their
// generations' counts; the caller wakes the flushers once it has resolved
// them (see finish). Called with p.mu held.
func (p *Publisher) release(items []item) {
	for _, it := range items {
		<-p.slots // never blocks: each item holds one token
		if p.genPending[it.gen]--; p.genPending[it.gen] == 0 {
			delete(p.genPending, it.gen)
		}
	}
}

func (p *Publisher) wakeFlushers() {
	keep := p.flushers[:0]
	for _, f := range p.flushers {
		if p.pendingUpTo(f.gen) {
			keep = append(keep, f)
		} else {
			close(f.ch)
		}
	}
	clear(p.flushers[len(keep):])
	p.flushers = keep
}

// pendingUpTo reports whether an event of generation ≤ gen is unresolved.
func (p *Publisher) pendingUpTo(gen uint64) bool {
	for g := range p.genPending {
		if g <= gen {
			return true
		}
	}
	return false
}

// retryable reports whether a failed attempt may have been lost in transit
// rather than refused: those are re-sent with the same Nats-Msg-Id, so a
// message that was stored after all is not stored twice. A socket error
// (broken pipe, connection reset: the server went away while nats.go was
// flushing the write buffer) is one of them; the client reconnects and the
// retry goes on the new connection. Two JetStream answers are retried too:
// "duplicate message id is in process" (a clustered stream is still
// replicating an earlier attempt of this very message: the retry is answered
// as a duplicate once that attempt is stored, or stores it if it was lost)
// and "JetStream system temporarily unavailable" (no stream leader, as during
// an election after a server failed).
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's own deadline, not the network's (both are net.Errors)
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode == jsErrDuplicateInProcess || api.ErrorCode == jsErrClusterNotAvailable
	}
	var op *net.OpError
	return errors.As(err, &op) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, nats.ErrStaleConnection) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrReconnectBufExceeded) ||
		errors.Is(err, nats.ErrTimeout)
}

// Flush sends every queued event now, without waiting for Linger, and waits
// until every event accepted before the call has resolved (stored or
// failed), or ctx ends (it then returns ctx.Err()). Events published
// concurrently with Flush are sent too but not waited for.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	ch := p.flushLocked()
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		select {
		case <-ch: // done as well: select picked at random
			return nil
		default:
			return ctx.Err()
		}
	}
}

// flushLocked marks every queued thread for immediate sending, starts a new
// generation and returns a channel closed when the older ones are resolved.
func (p *Publisher) flushLocked() chan struct{} {
	g := p.gen
	p.gen++
	for _, th := range p.threads {
		if len(th.queued()) > 0 {
			th.flush = true
			p.schedule(th, th.firstAt)
		}
	}
	ch := make(chan struct{})
	if p.pendingUpTo(g) {
		p.flushers = append(p.flushers, flusher{gen: g, ch: ch})
	} else {
		close(ch)
	}
	return ch
}

// Close stops intake (Publish returns ErrClosed from now on), sends what is
// queued and waits for every pending event to resolve, then stops the
// Publisher's goroutine. If ctx ends first, the events still pending are
// resolved with ErrClosed (they may or may not have been stored), the
// goroutine is stopped all the same, and Close returns ctx.Err(). Either
// way it then takes its subscription for acks off the connection. Close is
// idempotent; later calls return nil at once. It does not close the NATS
// connection, which the caller owns.
func (p *Publisher) Close(ctx context.Context) error {
	var err error
	first := false
	p.closeOnce.Do(func() {
		first = true
		p.mu.Lock()
		p.isClosing = true
		close(p.closing)
		ch := p.flushLocked()
		p.mu.Unlock()

		select {
		case <-ch:
		case <-ctx.Done():
			// select picks at random among ready cases: a drain that is
			// complete (nothing to abandon) is not a ctx that ended first.
			select {
			case <-ch:
			default:
				err = ctx.Err()
				p.abandon()
			}
		}
		close(p.stop)
		<-p.done
		// The JetStream context's ack subscription and its listener of the
		// connection's status (a goroutine of nats.go's) live on the
		// caller's connection until removed; nothing is pending any more
		// (what was is resolved), so no ack is lost with them.
		p.js.CleanupPublisher()
	})
	if !first {
		return nil
	}
	return err
}

// abandon resolves every pending event with ErrClosed (Close's hard stop).
func (p *Publisher) abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.inflight {
		p.failLocked(m, ErrClosed)
	}
	for key, th := range p.threads {
		q := th.queued()
		p.ctr.failed.Add(uint64(len(q)))
		p.release(q)
		for _, it := range q {
			it.fut.resolve(Ack{}, ErrClosed)
		}
		th.items, th.buf, th.first, th.off = nil, nil, 0, 0
		delete(p.threads, key)
	}
	p.wakeFlushers()
	p.ready = p.ready[:0]
	p.timers = p.timers[:0]
}

// timerEntry is a lingering thread (th) or a message waiting for its retry (m).
type timerEntry struct {
	at time.Time
	th *thread
	m  *message
}

// timerHeap is a min-heap of timerEntry by at.
type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = timerEntry{}
	*h = old[:len(old)-1]
	return e
}

// PublishEvent encodes ev (codec.AppendEvent) and publishes it as Publish
// does, validation included: an Event built by hand can still break a rule
// that only the decoder checks. ev is not retained.
func (p *Publisher) PublishEvent(ctx context.Context, tenant, threadID string, ev *codec.Event) (*Future, error) {
	return p.Publish(ctx, tenant, threadID, codec.AppendEvent(make([]byte, 0, 256), ev))
}
