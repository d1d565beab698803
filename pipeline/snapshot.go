package pipeline

import (
	"context"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/wire"
)

// DefaultSnapshotQueue is Config.SnapshotQueue's value when it is 0.
const DefaultSnapshotQueue = 256

// snapWaitersPerThread bounds the requests queued for one thread (requests
// of several fanout nodes; one node asks once per thread at a time).
const snapWaitersPerThread = 64

// snapGroupsPerTurn bounds the threads answered per turn of the shard loop,
// so that a queue of snapshot requests does not hold frames back for long
// (the cold ones among them are read together: preloadCold).
const snapGroupsPerTurn = 16

// preloadCold reads the checkpoints of the threads of gs that are not in
// memory, concurrently (loadAll), for snapshot to answer from. Read one by
// one, a join storm over many cold threads (thousands of dashboards
// opening at once) cost a round trip per thread, and the shard's frames
// waited for all of them. A read that fails is left to snapshot, which
// reads it again and answers the error.
func (s *shard) preloadCold(ctx context.Context, gs []snapGroup) {
	var todo []*hotThread
	for _, g := range gs {
		p, tenant, token, err := wire.ParseSnapSubject(g.subject)
		if err != nil || s.parts[p] == nil || wire.Partition(tenant, token, s.cfg.Partitions) != p {
			continue
		}
		k := threadKey{tenant, token}
		if s.threads[k] != nil || s.cold[k] != nil {
			continue
		}
		todo = append(todo, coldThread(s.parts[p], k))
	}
	if len(todo) < 2 {
		return
	}
	if s.cold == nil {
		s.cold = make(map[threadKey]*hotThread)
	}
	for i, err := range s.loadAll(ctx, todo) {
		s.forgetCold(todo[i].key) // read to answer, not to write
		if err == nil {
			s.cold[todo[i].key] = todo[i]
		}
	}
}

// snapQueue is a shard's bounded queue of snapshot requests, coalesced by
// thread and body: a request for a thread already queued with the same body
// (the same window, or the same page) joins that entry and is answered with
// the same reply, so a join storm costs one encoding per thread and window,
// and the bound is on distinct entries (limit), not on requests.
//
// Overflow policy: tail drop. A request that would add a thread beyond
// limit (or a waiter beyond snapWaitersPerThread) is answered at once with
// wire.SnapErrBusy and counted as Snapshots{result="busy"}; what is queued is
// never displaced. The fanout retries busy replies with backoff.
//
// add is called by the NATS subscription goroutines, take by the shard
// goroutine; mu guards the rest.
type snapQueue struct {
	limit int
	sig   chan struct{} // capacity 1: "the queue is not empty"

	mu      sync.Mutex
	pending map[string][]*nats.Msg // by snapKey
	order   []string               // snapKeys, oldest first
}

func newSnapQueue(limit int) *snapQueue {
	if limit <= 0 {
		limit = DefaultSnapshotQueue
	}
	return &snapQueue{limit: limit, sig: make(chan struct{}, 1), pending: make(map[string][]*nats.Msg)}
}

// add queues req, or reports false when the queue is full (the caller
// answers busy).
func (q *snapQueue) add(req *nats.Msg) bool {
	key := snapKey(req)
	q.mu.Lock()
	reqs, queued := q.pending[key]
	switch {
	case queued && len(reqs) >= snapWaitersPerThread, !queued && len(q.order) >= q.limit:
		q.mu.Unlock()
		return false
	case !queued:
		q.order = append(q.order, key)
	}
	q.pending[key] = append(reqs, req)
	q.mu.Unlock()
	select {
	case q.sig <- struct{}{}:
	default:
	}
	return true
}

// snapKey is what requests must share to be answered with one reply: the
// subject (the thread) and the body (what is asked of it).
func snapKey(req *nats.Msg) string {
	if len(req.Data) == 0 {
		return req.Subject
	}
	return req.Subject + "\x00" + string(req.Data)
}

// snapGroup is the queued requests for one thread with one body.
type snapGroup struct {
	subject string
	body    []byte
	reqs    []*nats.Msg
}

// take appends up to most groups, oldest first, to dst and removes them; it
// re-signals when groups remain.
func (q *snapQueue) take(dst []snapGroup, most int) []snapGroup {
	q.mu.Lock()
	n := min(most, len(q.order))
	for _, key := range q.order[:n] {
		reqs := q.pending[key]
		dst = append(dst, snapGroup{subject: reqs[0].Subject, body: reqs[0].Data, reqs: reqs})
		delete(q.pending, key)
	}
	clear(q.order[:n])
	q.order = q.order[n:]
	if len(q.order) == 0 {
		q.order = q.order[:0:0] // let the backing array go
	}
	left := len(q.order) > 0
	q.mu.Unlock()
	if left {
		select {
		case q.sig <- struct{}{}:
		default:
		}
	}
	return dst
}

// snapshot answers the queued requests for one thread on
// tc.snap.<p>.<tenant>.<token> (frame.go) with one reply. It runs on the
// shard goroutine between batches, so the reply's seq is the seq of the
// thread's last published frame.
//
// The encoded whole reply of a hot thread is cached on the thread (t.snap)
// until the next apply changes it, so that every request at the same seq —
// whichever node, whenever — is answered with the same bytes, encoded once.
// The cache counts in the thread's memory (t.mem), so it is bounded by
// MemoryBudget like the view itself. Windowed snapshots and pages are not
// cached: they cost what they hold (reducer/window.go), and the requests
// queued with the same body share one encoding.
func (s *shard) snapshot(ctx context.Context, g snapGroup) {
	p, tenant, token, err := wire.ParseSnapSubject(g.subject)
	if err != nil {
		s.m.Snapshots.WithLabelValues("error").Add(float64(len(g.reqs)))
		snapErrorAll(g.reqs, wire.SnapErrBadRequest, "malformed snapshot subject")
		return
	}
	req, err := wire.ParseSnapRequest(g.body)
	if err != nil {
		s.m.Snapshots.WithLabelValues("error").Add(float64(len(g.reqs)))
		snapErrorAll(g.reqs, wire.SnapErrBadRequest, err.Error())
		return
	}
	part := s.parts[p]
	if part == nil || wire.Partition(tenant, token, s.cfg.Partitions) != p {
		s.m.Snapshots.WithLabelValues("error").Add(float64(len(g.reqs)))
		snapErrorAll(g.reqs, wire.SnapErrPartition, "thread is in partition "+strconv.Itoa(wire.Partition(tenant, token, s.cfg.Partitions)))
		return
	}
	k := threadKey{tenant, token}
	t, result := s.threads[k], "hot"
	if t == nil && s.cold[k] != nil {
		t, result = s.cold[k], "cold"
	}
	if t == nil {
		t = coldThread(part, k)
		err := s.load(ctx, t)
		s.forgetCold(k) // read to answer, not to write: no revision to keep
		if err != nil {
			s.m.Snapshots.WithLabelValues("error").Add(float64(len(g.reqs)))
			snapErrorAll(g.reqs, wire.SnapErrStore, err.Error())
			return
		}
		// Not kept hot: a snapshot of a cold thread should not evict a
		// thread that is being written to.
		result = "cold"
	}
	seq := t.th.Seq()
	var data []byte
	switch {
	case req.Page != nil:
		data, err = s.encodePage(t, req.Page)
		if err != nil {
			s.m.Snapshots.WithLabelValues("error").Add(float64(len(g.reqs)))
			snapErrorAll(g.reqs, wire.SnapErrNoMessage, "no message "+strconv.Quote(truncateN(req.Page.Before, 128))+" in the thread")
			return
		}
		result = "page"
	case req.Window > 0:
		data, result = s.encodeWindow(t, req.Window), "window"
	case t.snap != nil && t.snapSeq == seq:
		data, result = t.snap, "cached"
	default:
		if seq == 0 {
			result = "miss"
		}
		data = s.encodeSnapshot(t)
		if result == "hot" {
			t.snap, t.snapSeq = data, seq
			t.mem += len(data)
			s.mem += int64(len(data))
		}
	}
	s.m.Snapshots.WithLabelValues(result).Inc()
	if len(g.reqs) > 1 {
		s.m.Snapshots.WithLabelValues("coalesced").Add(float64(len(g.reqs) - 1))
	}
	// The replies share data and the header: PublishMsg copies both into
	// the connection's buffer and neither is changed before the last one
	// is sent (a Responder that holds a reply keeps its own copy of the
	// header). The header is the shard's, reused, as the frame's is.
	s.snapHdrSeq[0] = strconv.FormatUint(seq, 10)
	h := s.snapHdr
	for _, req := range g.reqs {
		_ = s.respondParts(req, h, data) // counted, logged and told to the requester by respondParts
	}
}

// dropSnapshot forgets t's cached snapshot reply: t is about to change.
func (s *shard) dropSnapshot(t *hotThread) {
	if t.snap == nil {
		return
	}
	t.mem -= len(t.snap)
	s.mem -= int64(len(t.snap))
	t.snap, t.snapSeq = nil, 0
}

// encodeSnapshot returns t's snapshot reply body in a new slice (it may be
// cached, so it must not alias s.buf).
func (s *shard) encodeSnapshot(t *hotThread) []byte {
	b := appendReplyHead(s.buf[:0], t)
	b = append(b, `,"view":`...)
	b = appendThreadView(b, t.th)
	b = append(b, `,"events":`...)
	b = appendSnapshotEvents(b, t.th)
	b = append(b, '}')
	s.buf = b[:0]
	return append([]byte(nil), b...)
}

// encodeWindow returns t's windowed snapshot reply body for a window of n
// messages, in a new slice.
func (s *shard) encodeWindow(t *hotThread, n int) []byte {
	b := appendReplyHead(s.buf[:0], t)
	b = append(b, `,"window":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"view":`...)
	b = t.th.AppendWindowView(b, n)
	b = append(b, `,"events":`...)
	b = appendWindowSnapshotEvents(b, t.th, n)
	b = append(b, '}')
	s.buf = b[:0]
	return append([]byte(nil), b...)
}

// encodePage returns the page reply body for pr, in a new slice, or
// reducer.ErrNoMessage.
func (s *shard) encodePage(t *hotThread, pr *wire.PageRequest) ([]byte, error) {
	pg, err := t.th.MessagePage(pr.Before, pr.Limit)
	if err != nil {
		return nil, err
	}
	b := appendReplyHead(s.buf[:0], t)
	b = append(b, `,"messages":`...)
	b = t.th.AppendMessageRange(b, pg.First, pg.End)
	b = append(b, `,"first":`...)
	b = strconv.AppendInt(b, int64(pg.First), 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, int64(pg.End), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(pg.Total), 10)
	if pg.First > 0 {
		b = append(b, `,"before":`...)
		b = appendJSONString(b, t.th.MessageID(pg.First))
	}
	b = append(b, '}')
	s.buf = b[:0]
	return append([]byte(nil), b...), nil
}

// appendReplyHead appends the members every reply starts with, from "{"
// through "found".
func appendReplyHead(b []byte, t *hotThread) []byte {
	seq := t.th.Seq()
	b = append(b, `{"tenant":"`...)
	b = append(b, t.key.tenant...)
	b = append(b, `","thread":`...)
	b = appendJSONString(b, t.id)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"status":"`...)
	b = append(b, t.th.Status().String()...)
	b = append(b, `","found":`...)
	return strconv.AppendBool(b, seq > 0)
}

func snapErrorAll(reqs []*nats.Msg, kind, text string) {
	for _, req := range reqs {
		snapError(req, kind, text)
	}
}

func snapError(req *nats.Msg, kind, text string) {
	_ = req.RespondMsg(&nats.Msg{Header: nats.Header{wire.HeaderErrorKind: {kind}, wire.HeaderError: {truncateN(text, 256)}}})
}
