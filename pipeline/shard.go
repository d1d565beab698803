package pipeline

// NOTE: structure of this file. A shard is one goroutine (run) that owns a
// set of partitions and every thread in them. It takes messages from its
// bounded queue q in batches: handle applies each message to its thread,
// then flush publishes one frame per changed thread, writes the checkpoints
// the policy asks for, and acks each partition up to its low watermark.
// Snapshot requests are answered between batches, so a reply's seq is always
// that of a frame already published. Thread loading and eviction (LRU by
// MemSize) are at the end.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/reducer/compact"
	"github.com/threadcast/threadcast/wire"
)

type threadKey struct{ tenant, token string }

// hotThread is a thread held in memory. Invariants: dirtySeq == 0 iff the
// stored checkpoint covers th.Seq(); frameSeq == th.Seq() after every flush.
type hotThread struct {
	key      threadKey
	id       string // the decoded thread id
	idJSON   []byte // id as a JSON string, for frames
	subject  string // the thread's view subject
	part     *partState
	th       *reducer.Thread
	frameSeq uint64
	framedAt time.Time // when its last frame was published (zero: none since loaded)
	ckptSeq  uint64
	ckptLen  int                // bytes of its last checkpoint record (0: none written since loaded)
	dirtySeq uint64             // first stream seq applied since the checkpoint; 0 = clean
	dirtyAt  time.Time          // when it became dirty
	applied  int                // events applied since the checkpoint
	inBatch  bool               // seq advanced in the current batch: a frame is due
	batchAt  time.Time          // when the first event of the frame due was taken up
	compact  *compact.Compactor // the frame's events since the last frame
	run      runAcc
	lastAt   int64 // Unix ms of the last event applied (wire.HeaderLastEvent); 0: none since loaded
	mem      int   // th.MemSize() + len(snap)
	// viewSize is th.ViewSize() when last measured (load, frame) and
	// viewGrown the bytes of the events applied since: their sum bounds
	// the view from above cheaply, and only near MaxViewBytes is the view
	// measured again (overView).
	viewSize, viewGrown int
	// snap is the encoded snapshot reply at snapSeq (nil: none cached);
	// dropped by the next apply (snapshot.go).
	snap    []byte
	snapSeq uint64
	// put is the checkpoint write in flight (at most one per thread);
	// nextDirty the first seq applied since it was issued (0: none).
	put       *pendingPut
	nextDirty uint64
	// chunkGen/chunkN describe the stored chunked checkpoint (0: not
	// chunked): the generation whose head the store has confirmed (or that
	// was loaded). Only its chunks may be reused or purged.
	chunkGen uint64
	chunkN   int
	// stray are chunk generations written for heads that were not
	// confirmed (failed, or their chunks' writes did), at most maxStray:
	// once a head of another generation is confirmed, nothing reads them,
	// and they are purged with the previous generation's chunks.
	stray []chunkSet
	// LRU list (most recent at s.lruHead).
	prev, next *hotThread
}

// chunkSet names the chunks of one generation of a thread's checkpoint.
type chunkSet struct {
	gen uint64
	n   int
}

// maxStray bounds a thread's stray chunk generations; past it the oldest
// is forgotten (its chunks stay in the bucket).
const maxStray = 8

// addStray records chunks written for a head that was not confirmed.
func (t *hotThread) addStray(gen uint64, n int) {
	for i := range t.stray {
		if t.stray[i].gen == gen {
			t.stray[i].n = max(t.stray[i].n, n)
			return
		}
	}
	if len(t.stray) == maxStray {
		t.stray = append(t.stray[:0], t.stray[1:]...)
	}
	t.stray = append(t.stray, chunkSet{gen, n})
}

// pendingPut is a checkpoint write the store has not confirmed yet.
type pendingPut struct {
	t   *hotThread
	seq uint64 // the thread's seq the checkpoint covers
	f   PutFuture
	// chunkGen/chunkN: the chunk generation the written head points at
	// (chunkN 0: the record was written whole).
	chunkGen uint64
	chunkN   int
}

// delivery is a consumed message with its stream seq (0: not known; the
// shard reads it from the message's metadata).
type delivery struct {
	msg jetstream.Msg
	seq uint64
}

// pendingMsg is a delivered message not yet acked.
type pendingMsg struct {
	seq uint64
	msg jetstream.Msg
}

// partState is one owned partition's delivery and ack bookkeeping.
type partState struct {
	p       int
	cons    jetstream.Consumer
	pending []pendingMsg // in stream order
	lastSeq uint64       // highest stream seq delivered (redeliveries are ≤)
	ackedAt time.Time    // when the last ack was sent
	acked   uint64       // the stream seq of the last ack (0: none)
	floor   uint64       // the last floor stored in the bucket (floor.go)
	floorAt time.Time    // when it was stored
	blocked uint64       // a delivered message that could not be applied (0: none): nothing from it on is acked
	dirty   map[*hotThread]struct{}
	win     quota.Window // the partition's tenants' ingest rates (quota.go)
}

// watermark is the smallest stream seq not covered by a stored checkpoint
// among the partition's dirty threads: every delivered message below it
// is covered, so it may be acked.
func (p *partState) watermark() uint64 {
	wm := uint64(math.MaxUint64)
	if p.blocked != 0 {
		wm = p.blocked
	}
	for t := range p.dirty {
		wm = min(wm, t.dirtySeq)
	}
	return wm
}

type shard struct {
	id    int
	cfg   *Config
	log   *slog.Logger
	m     *Metrics
	pub   Publisher
	store CheckpointStore
	parts map[int]*partState

	q     chan delivery // bounded by cfg.QueueLen; full = back-pressure on the consumer
	snapq *snapQueue    // bounded, coalesced by thread; full = the request is answered "busy"
	snaps []snapGroup   // scratch for snapq.take

	threads          map[threadKey]*hotThread
	lruHead, lruTail *hotThread
	mem              int64
	batch            []*hotThread  // threads changed in the current batch
	puts             []*pendingPut // checkpoint writes in flight, oldest first

	dec codec.Decoder
	ev  codec.Event
	buf []byte         // scratch for encoding
	evs []*codec.Event // scratch for compacted events
	now time.Time
	// quota is the quota state of the message being handled (quota.go).
	quota msgQuota

	// The frame message, reused for every frame (Publisher keeps no
	// reference): one header map and message per shard instead of per frame.
	frameMsg                  nats.Msg
	frameHdrSeq, frameHdrPrev [1]string
	frameHdrStatus            [1]string
	ds                        []delivery // the batch being handled (run), reused
	// preloaded holds threads whose checkpoints preload read for the batch
	// being handled; thread takes them from here.
	preloaded map[threadKey]*hotThread
	// cold holds the threads preloadCold read for the snapshot groups
	// being answered (not kept hot); snapshot takes them from here.
	cold         map[threadKey]*hotThread
	frameHdrSent [1]string
	// stored is when JetStream stored the message being handled (Unix ns;
	// 0: unknown).
	stored     int64
	replyMsg   nats.Msg    // respondParts' message, reused likewise
	snapHdr    nats.Header // snapshot replies' header, over snapHdrSeq
	snapHdrSeq [1]string

	partSize int             // the largest body sent as one message (send.go)
	sendLog  sendLog         // rate limit of send failure logs
	resp     *wire.Responder // sends large snapshot replies window by window; nil: all at once (tests)
	tap      Publisher       // sends tap messages to the tap stream (tap.go); nil: through pub (live only)
}

func newShard(id int, cfg *Config, log *slog.Logger, m *Metrics, pub Publisher, store CheckpointStore) *shard {
	s := &shard{
		id: id, cfg: cfg, log: log.With("shard", id), m: m, pub: pub, store: store,
		parts:   make(map[int]*partState),
		q:       make(chan delivery, cfg.QueueLen),
		snapq:   newSnapQueue(cfg.SnapshotQueue),
		threads: make(map[threadKey]*hotThread),
	}
	s.frameMsg.Header = nats.Header{wire.HeaderSeq: s.frameHdrSeq[:], wire.HeaderPrev: s.frameHdrPrev[:], wire.HeaderSent: s.frameHdrSent[:],
		wire.HeaderStatus: s.frameHdrStatus[:]}
	s.snapHdr = nats.Header{wire.HeaderSeq: s.snapHdrSeq[:]}
	s.partSize = partSizeOf(pub, cfg)
	return s
}

// maxCheckpointsPerFlush bounds the checkpoints a batch issues, except at
// shutdown and under ack pressure.
const maxCheckpointsPerFlush = 64

// maxBatch bounds how many queued messages one batch takes, so frames and
// acks are never delayed by more than that much work.
const maxBatch = 1024

// run is the shard goroutine. It returns after stop is closed and the queue
// is drained, every dirty thread checkpointed (best effort within hardCtx)
// and every covered message acked.
func (s *shard) run(stop <-chan struct{}, hardCtx context.Context) {
	tick := time.NewTicker(max(s.cfg.CheckpointInterval/2, time.Millisecond))
	defer tick.Stop()
	// The shard's frame burst (and its checkpoints and acks) comes at most
	// every FrameInterval: batches that arrive closer together are
	// coalesced, so a busy thread sends fewer frames and the frames of many
	// threads leave together. Within the interval, the threads that have
	// not framed for FrameInterval are framed at once (frameQuiet): only
	// the busy ones wait for the burst.
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	armed := false
	var last time.Time
	for {
		select {
		case d := <-s.q:
			s.now = time.Now()
			ds := append(s.ds[:0], d)
			for len(ds) < maxBatch {
				select {
				case d = <-s.q:
					ds = append(ds, d)
					continue
				default:
				}
				break
			}
			s.preload(hardCtx, ds)
			for i, d := range ds {
				s.handle(hardCtx, d.msg, d.seq)
				ds[i] = delivery{}
			}
			s.ds = ds[:0]
			s.dropPreloaded() // read for this batch only
			if wait := s.cfg.FrameInterval - s.now.Sub(last); wait > 0 {
				// Within the interval only the threads that framed
				// within it wait: a thread quiet for longer gains
				// nothing from the wait (it has one frame to send
				// either way), so its frame goes now, and a busy
				// neighbour in the shard costs it no latency.
				s.frameQuiet()
				if !armed {
					due.Reset(wait)
					armed = true
				}
				continue
			}
			s.flush(hardCtx, false)
			last = s.now
		case <-due.C:
			armed = false
			s.now = time.Now()
			s.flush(hardCtx, false)
			last = s.now
		case <-s.snapq.sig:
			s.now = time.Now()
			if len(s.batch) > 0 { // the reply's seq must be that of a published frame
				s.flush(hardCtx, false)
				last = s.now
			}
			s.snaps = s.snapq.take(s.snaps[:0], snapGroupsPerTurn)
			s.preloadCold(hardCtx, s.snaps)
			for i, g := range s.snaps {
				s.snapshot(hardCtx, g)
				s.snaps[i] = snapGroup{}
			}
			clear(s.cold)
		case <-tick.C:
			s.now = time.Now()
			s.flush(hardCtx, false)
		case <-stop:
			s.now = time.Now()
			for {
				select {
				case d := <-s.q:
					s.handle(hardCtx, d.msg, d.seq)
					continue
				default:
				}
				break
			}
			s.flush(hardCtx, true)
			// Requests still queued get "busy": the requester retries
			// (on this thread's next owner).
			for g := s.snapq.take(nil, math.MaxInt); len(g) > 0; g = g[1:] {
				snapErrorAll(g[0].reqs, wire.SnapErrBusy, "shutting down")
			}
			return
		}
	}
}

// handle applies one delivered message, whose stream seq is seq (0: read it
// from the message's metadata).
func (s *shard) handle(ctx context.Context, msg jetstream.Msg, seq uint64) {
	if seq == 0 {
		meta, err := msg.Metadata()
		if err != nil { // not a JetStream message: cannot happen from a consumer
			s.log.Error("message without metadata", "err", err)
			return
		}
		seq = meta.Sequence.Stream
	}
	s.m.Messages.Inc()
	part, tenant, token, perr := wire.ParseStoredSubject(msg.Subject())
	ps := s.parts[part]
	if perr != nil || ps == nil {
		// The stream's transform only stores valid partitions, so a bad
		// subject means a bad tenant or thread token from the publisher.
		// It touches no thread: dead-letter it and let it be acked.
		s.deadLetter(tenantOf(msg.Subject()), threadTokenOf(msg.Subject()), msg.Data(), wire.ErrKindSubject, errOr(perr, "partition not owned"), seq, -1, "")
		if ps = s.anyPart(part); ps == nil {
			_ = msg.Ack() // not ours to track; acking can only release it
			return
		}
		ps.track(seq, msg)
		return
	}
	if seq <= ps.lastSeq { // a redelivery: applied before (or skipped); the original's ack covers it
		s.m.Skipped.Inc()
		return
	}
	ps.track(seq, msg)
	s.stored = 0
	if ns, ok := ackReplyTime(msg.Reply()); ok {
		s.stored = ns
	}
	s.beginQuota(tenant, msg)
	t := s.thread(ctx, ps, threadKey{tenant, token})
	if t == nil {
		// Shutting down while the store is unreachable: the message was not
		// applied, so neither it nor anything after it may be acked; it is
		// replayed by the next owner.
		ps.pending = ps.pending[:len(ps.pending)-1]
		if ps.blocked == 0 {
			ps.blocked = seq
		}
		return
	}
	s.touch(t)
	if seq <= t.th.Seq() { // already applied before a crash: the checkpoint covers it
		s.m.Skipped.Inc()
		s.countSkipped(t, msg.Data())
		return
	}
	if s.stored > 0 {
		s.m.stageConsume.Observe(float64(s.now.UnixNano()-s.stored) / 1e9)
	}
	start := time.Now()
	s.apply(t, seq, msg.Data(), msg.Headers())
	s.m.ApplySeconds.Observe(time.Since(start).Seconds())
}

func errOr(err error, text string) string {
	if err != nil {
		return err.Error()
	}
	return text
}

// anyPart returns the partition state p, if owned.
func (s *shard) anyPart(p int) *partState { return s.parts[p] }

func (p *partState) track(seq uint64, msg jetstream.Msg) {
	p.lastSeq = seq
	p.pending = append(p.pending, pendingMsg{seq, msg})
}

// apply decodes one message — one event or a JSONL batch — and applies its
// events to t, all with the message's stream seq.
//
// A message with no event in it (an empty or blank body) changes nothing:
// it is dead-lettered, and the thread is neither framed nor checkpointed
// for it.
func (s *shard) apply(t *hotThread, seq uint64, data []byte, h nats.Header) {
	if _, _, ok := history.NextEvent(data); !ok {
		s.m.Rejected.WithLabelValues(wire.ErrKindDecode).Inc()
		s.deadLetter(t.key.tenant, t.key.token, data, wire.ErrKindDecode, "the message holds no event", seq, 0, "")
		return
	}
	s.dropSnapshot(t)
	lines := 0
	for {
		ev, rest, ok := history.NextEvent(data)
		if !ok {
			break
		}
		s.applyOne(t, seq, ev, lines)
		lines++
		data = rest
	}
	if n := h.Get(wire.HeaderBatch); n != "" && n != strconv.Itoa(lines) {
		s.m.BatchMismatch.Inc()
	}
	s.changed(t, seq)
}

func (s *shard) applyOne(t *hotThread, seq uint64, line []byte, idx int) {
	if k := s.exhausted(t, len(line)); k != 0 {
		s.shed(t, seq, line, idx, k)
		return
	}
	err := s.dec.Decode(line, &s.ev)
	for _, w := range s.dec.Warnings() {
		t.th.Warn(seq, reducer.CodecWarning(seq, w))
		s.m.Warnings.Inc()
	}
	if err != nil {
		var ce *codec.Error
		if !errors.As(err, &ce) || ce.Verdict == codec.Fatal {
			kind := wire.ErrKindInvalid
			if ce == nil || ce.Kind == codec.KindSyntax {
				kind = wire.ErrKindDecode
			}
			s.m.Rejected.WithLabelValues(kind).Inc()
			s.deadLetter(t.key.tenant, t.key.token, line, kind, err.Error(), seq, idx, "")
			t.th.Reject(seq, err)
			if t.run.reject(seq, err.Error(), s.now) {
				s.runEnded(t)
			}
			return
		}
		// Drop: warn-and-skip (processing model): the view counts it.
		t.th.Warn(seq, reducer.CodecWarning(seq, ce))
		s.m.Warnings.Inc()
		return
	}
	if k := s.admit(t, len(line)); k != 0 {
		s.shed(t, seq, line, idx, k)
		return
	}
	if s.overView(t, len(line)) {
		err := fmt.Errorf("%w: the view holds %d bytes and this event of %d bytes would take it past the limit of %d (MaxViewBytes, --max-view-bytes)",
			ErrViewTooLarge, t.viewSize, len(line), s.cfg.MaxViewBytes)
		s.m.ViewLimit.Inc()
		s.m.Rejected.WithLabelValues(wire.ErrKindTooBig).Inc()
		s.deadLetter(t.key.tenant, t.key.token, line, wire.ErrKindTooBig, err.Error(), seq, idx, "")
		t.th.Reject(seq, err)
		if t.run.reject(seq, err.Error(), s.now) {
			s.runEnded(t)
		}
		return
	}
	if other := history.OtherThread(&s.ev, t.id); other != nil { // as history.FoldStored folds it
		s.m.Rejected.WithLabelValues(wire.ErrKindInvalid).Inc()
		s.deadLetter(t.key.tenant, t.key.token, line, wire.ErrKindInvalid, other.Error(), seq, idx, "")
		t.th.Warn(seq, reducer.Warning{Code: history.WarnOtherThread, Seq: seq, Message: other.Error()})
		s.m.Warnings.Inc()
		return
	}
	t.lastAt = eventTime(&s.ev, s.now)
	if s.stored > 0 && s.ev.Has(codec.FieldTimestamp) && s.ev.Timestamp > 0 {
		s.m.stagePublish.Observe(float64(s.stored-s.ev.Timestamp*int64(time.Millisecond)) / 1e9)
	}
	res := t.th.Apply(seq, &s.ev)
	if len(res.Warnings) > 0 {
		s.m.Warnings.Add(float64(len(res.Warnings)))
	}
	if res.Fatal != nil {
		t.compact.Add(&s.ev, res) // a barrier: nothing folds across it
		if errors.Is(res.Fatal, reducer.ErrStaleSeq) {
			s.m.Skipped.Inc()
			return
		}
		s.m.Rejected.WithLabelValues(wire.ErrKindInvalid).Inc()
		s.deadLetter(t.key.tenant, t.key.token, line, wire.ErrKindInvalid, res.Fatal.Error(), seq, idx, "")
		if t.run.reject(seq, res.Fatal.Error(), s.now) {
			s.runEnded(t)
		}
		return
	}
	s.m.eventIn(s.ev.Type)
	t.compact.Add(&s.ev, res)
	if s.cfg.Tap {
		s.buf = codec.AppendEvent(s.buf[:0], &s.ev)
		s.publish(wire.TapSubject(t.key.tenant, s.ev.Type.String(), t.key.token), s.buf, seq, "")
	}
	if t.run.observe(seq, &s.ev, s.now) {
		s.runEnded(t)
	}
}

// ErrViewTooLarge is the reason (wrapped) of a run ended because its
// thread's view reached Config.MaxViewBytes.
var ErrViewTooLarge = errors.New("pipeline: thread view too large")

// overView reports whether applying an event of n bytes could take t's
// view past MaxViewBytes: the view's measured size plus the bytes applied
// since bounds it (an event adds at most about its own size), and only
// when that bound passes the limit is the view measured again. The size is
// reducer.Thread.ViewSize, not MemSize: MemSize depends on whether the
// thread was built in memory or reloaded (grown buffers, split documents),
// and the same stream must be judged the same either way, a replay after
// an eviction or a crash included.
func (s *shard) overView(t *hotThread, n int) bool {
	limit := s.cfg.MaxViewBytes
	if limit <= 0 {
		return false
	}
	if int64(t.viewSize+t.viewGrown+n) <= limit {
		t.viewGrown += n
		return false
	}
	t.viewSize, t.viewGrown = t.th.ViewSize(), 0
	if int64(t.viewSize+n) > limit {
		return true
	}
	t.viewGrown = n
	return false
}

// runEnded publishes the run summary. The thread is checkpointed as any
// dirty thread is (Config.CheckpointInterval), not at once: under load it
// is written within the interval anyway, and a write per run end on top
// of that doubled the store's writes when many runs ended together.
func (s *shard) runEnded(t *hotThread) {
	sum := t.run.s
	sum.Tenant, sum.Thread = t.key.tenant, t.id
	s.m.Runs.WithLabelValues(sum.Outcome).Inc()
	if s.cfg.Tap {
		b := appendRunSummary(s.buf[:0], &sum)
		s.publish(wire.TapSubject(t.key.tenant, wire.RunSummaryType, t.key.token), b, sum.EndSeq,
			runSummaryMsgID(t.key.tenant, t.key.token, sum.StartSeq, sum.RunID))
	}
	if s.cfg.Runs != nil {
		c := sum
		s.cfg.Runs.Run(&c)
	}
}

// changed records that t's seq advanced in this batch.
func (s *shard) changed(t *hotThread, seq uint64) {
	if !t.inBatch {
		t.inBatch = true
		t.batchAt = s.now
		s.batch = append(s.batch, t)
	}
	t.applied++
	if t.dirtySeq == 0 {
		t.dirtySeq, t.dirtyAt = seq, s.now
		t.part.dirty[t] = struct{}{}
	}
	if t.put != nil && t.nextDirty == 0 {
		t.nextDirty = seq
	}
}

// publish sends a tap message; msgID, when not "", is its Nats-Msg-Id (a
// message in parts carries none: the stream would keep only its first
// part). Run summaries (msgID set) go through the tap stream's publisher
// when the tap is durable; normalized events too when it keeps them all
// (Config.TapKeep).
func (s *shard) publish(subject string, data []byte, seq uint64, msgID string) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{
		wire.HeaderSeq: {strconv.FormatUint(seq, 10)},
	}}
	if msgID != "" && len(data) <= s.partSize {
		msg.Header[jetstream.MsgIDHeader] = []string{msgID}
	}
	pub := s.pub
	if s.tap != nil && (msgID != "" || s.cfg.TapKeep == TapKeepAll) {
		pub = s.tap
	}
	_ = s.sendVia(pub, sendTap, msg) // not awaited (tap.go); counted and logged by send
}

// deadLetter publishes rejected input on dlq.<tenant>.<token>
// (deadLetterMsg, strays.go), in parts when it is larger than one NATS
// message. quotaName is wire.HeaderQuota's value ("": none).
func (s *shard) deadLetter(tenant, token string, data []byte, kind, reason string, seq uint64, idx int, quotaName string) {
	// Counted first: whoever sees the dead letter sees it counted.
	s.m.DeadLetters.WithLabelValues(kind).Inc()
	_ = s.send(sendDLQ, deadLetterMsg(tenant, token, data, kind, reason, seq, idx, quotaName))
}

func truncateN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// flush ends a batch: frames, checkpoints, acks, eviction. force
// checkpoints every dirty thread (shutdown).
func (s *shard) flush(ctx context.Context, force bool) {
	for _, t := range s.batch {
		s.frameThread(t)
	}
	clear(s.batch)
	s.batch = s.batch[:0]
	s.checkpoint(ctx, force)
	for _, ps := range s.parts {
		s.ack(ctx, ps, force)
	}
	s.evict()
}

// frameQuiet publishes the frames of the batch's threads whose last frame
// is older than FrameInterval (or that have none) and keeps the others in
// the batch for the next burst, in their order.
func (s *shard) frameQuiet() {
	kept := s.batch[:0]
	for _, t := range s.batch {
		if t.framedAt.IsZero() || s.now.Sub(t.framedAt) >= s.cfg.FrameInterval {
			s.frameThread(t)
			continue
		}
		kept = append(kept, t)
	}
	clear(s.batch[len(kept):])
	s.batch = kept
}

// frameThread publishes t's frame and takes it out of the batch's
// accounting: its view's size is measured anew.
func (s *shard) frameThread(t *hotThread) {
	s.frame(t)
	t.framedAt = s.now
	t.inBatch = false
	old := t.mem
	t.mem = t.th.MemSize() + len(t.snap)
	t.viewSize, t.viewGrown = t.th.ViewSize(), 0
	s.mem += int64(t.mem - old)
}

// frame publishes t's frame for the current batch.
func (s *shard) frame(t *hotThread) {
	seq := t.th.Seq()
	b := s.buf[:0]
	b = append(b, `{"tenant":"`...)
	b = append(b, t.key.tenant...)
	b = append(b, `","thread":`...)
	b = append(b, t.idJSON...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"prev":`...)
	b = strconv.AppendUint(b, t.frameSeq, 10)
	status := t.th.Status().String()
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","events":`...)
	b, s.evs = appendCompacted(b, t.compact, s.evs)
	n := len(b)
	b = append(b, `,"changes":`...)
	if b2 := appendChanges(b, t.th); len(b2) > len(b) {
		b = b2
	} else {
		b = b[:n]
	}
	b = append(b, '}')
	s.frameHdrSeq[0], s.frameHdrPrev[0] = strconv.FormatUint(seq, 10), strconv.FormatUint(t.frameSeq, 10)
	s.frameHdrStatus[0] = status
	s.frameMsg.Subject, s.frameMsg.Data = t.subject, b
	// A frame that could not be sent is lost like one a subscriber missed:
	// the next frame's Tc-Prev (this seq) shows the gap, and frameSeq
	// advances all the same so that it does.
	now := time.Now()
	s.frameHdrSent[0] = strconv.FormatInt(now.UnixNano(), 10)
	_ = s.send(sendFrame, &s.frameMsg)
	s.m.stageFrame.Observe(now.Sub(t.batchAt).Seconds())
	s.frameMsg.Data = nil
	s.buf = b[:0]
	s.m.Frames.Inc()
	t.frameSeq = seq
}

// checkpoint confirms the checkpoint writes the store has answered, then
// issues the ones the policy asks for. It does not wait for the store
// (except when force, at shutdown): writes are pipelined, so a shard never
// stalls a round trip per batch, and a thread becomes clean only when its
// write is confirmed.
func (s *shard) checkpoint(ctx context.Context, force bool) {
	s.confirmPuts(ctx, force) // at shutdown, settle every write in flight first
	// Threads that became dirty together reach the interval together; a cap
	// per batch spreads their encoding over several batches instead of one
	// long stall (map order picks at random, so none starves).
	budget := maxCheckpointsPerFlush
	for _, ps := range s.parts {
		pressure := len(ps.pending) >= s.cfg.MaxAckPending/2
		for t := range ps.dirty {
			if t.put != nil || !(force || pressure || t.applied >= s.cfg.CheckpointEvery ||
				s.now.Sub(t.dirtyAt) >= s.cfg.CheckpointInterval) {
				continue
			}
			if !force && !pressure {
				if budget == 0 {
					continue
				}
				budget--
			}
			// Sized by the thread's last checkpoint, and an eighth more for
			// what was applied since: one allocation, not a doubling series.
			rec := appendCkptHeader(make([]byte, 0, t.ckptLen+t.ckptLen/8), t.th.Seq(), t.frameSeq, t.run.marshal())
			rec = appendThreadCheckpoint(rec, t.th)
			t.ckptLen = len(rec)
			put, err := s.putRecord(ctx, t, rec)
			if err != nil {
				s.m.CheckpointFails.Inc()
				s.log.Warn("checkpoint put failed", "err", err)
				continue
			}
			t.put, t.nextDirty = put, 0
			t.applied = 0
			s.puts = append(s.puts, t.put)
		}
	}
	if force {
		s.confirmPuts(ctx, true)
	}
}

// confirmPuts marks the threads of answered checkpoint writes clean (or
// dirty only from the first seq applied after the write). With wait it
// waits for every write in flight, bounded by ctx and 10 s.
func (s *shard) confirmPuts(ctx context.Context, wait bool) {
	if len(s.puts) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	keep := s.puts[:0]
	for _, p := range s.puts {
		var done bool
		var err error
		if wait {
			done, err = true, p.f.Wait(wctx)
		} else {
			done, err = p.f.Result()
		}
		if !done {
			keep = append(keep, p)
			continue
		}
		t := p.t
		t.put = nil
		if err != nil {
			// Still dirty from the same seq: the policy retries the write.
			s.m.CheckpointFails.Inc()
			s.log.Warn("checkpoint not stored", "err", err)
			t.nextDirty = 0
			if p.chunkN > 0 && p.chunkGen != t.chunkGen {
				t.addStray(p.chunkGen, p.chunkN)
			}
			continue
		}
		s.m.Checkpoints.Inc()
		t.ckptSeq = p.seq
		// The stored head no longer points at the previous generation's
		// chunks: only now may they go (purged before the head was
		// confirmed, a failed head write would leave a head pointing at
		// purged chunks: an unreadable checkpoint, the thread restarted
		// empty). Nor at a stray generation's: a head whose write failed
		// may still have been stored, but this one supersedes it.
		key := wire.CheckpointKey(t.key.tenant, t.key.token)
		if t.chunkN > 0 && (p.chunkN == 0 || p.chunkGen != t.chunkGen) {
			s.purgeChunks(key, t.chunkGen, t.chunkN)
		}
		for _, c := range t.stray {
			if p.chunkN == 0 || c.gen != p.chunkGen {
				s.purgeChunks(key, c.gen, c.n)
			}
		}
		t.stray = t.stray[:0]
		t.chunkGen, t.chunkN = p.chunkGen, p.chunkN
		if t.nextDirty == 0 { // nothing applied since the write was issued
			t.dirtySeq = 0
			delete(t.part.dirty, t)
		} else {
			t.dirtySeq, t.dirtyAt, t.nextDirty = t.nextDirty, s.now, 0
		}
	}
	clear(s.puts[len(keep):])
	s.puts = keep
}

// putRecord stores t's checkpoint record: in one put, or, when larger than a
// chunk, as chunks (written and confirmed first) and then the head. The
// previous generation's chunks are purged by confirmPuts, once the store has
// confirmed the write that supersedes them.
func (s *shard) putRecord(ctx context.Context, t *hotThread, rec []byte) (*pendingPut, error) {
	key := wire.CheckpointKey(t.key.tenant, t.key.token)
	put := &pendingPut{t: t, seq: t.th.Seq()}
	chunk := s.chunkSize()
	meta := summaryHeader(t)
	if len(rec) <= chunk {
		f, err := s.store.Put(ctx, key, rec, meta)
		put.f = f
		return put, err
	}
	gen := t.th.Seq()
	if gen == t.chunkGen && t.chunkN > 0 { // this generation's chunks are stored
		f, err := s.store.Put(ctx, key, chunkHead(gen, t.chunkN), meta)
		put.f, put.chunkGen, put.chunkN = f, gen, t.chunkN
		return put, err
	}
	n := (len(rec) + chunk - 1) / chunk
	futs := make([]PutFuture, 0, n)
	for i := 0; i < n; i++ {
		f, err := s.store.Put(ctx, chunkKey(key, gen, i), rec[i*chunk:min(len(rec), (i+1)*chunk)], nil)
		if err != nil {
			if i > 0 {
				t.addStray(gen, i)
			}
			return nil, err
		}
		futs = append(futs, f)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, f := range futs {
		if err := f.Wait(wctx); err != nil {
			t.addStray(gen, n)
			return nil, fmt.Errorf("pipeline: checkpoint chunk: %w", err)
		}
	}
	f, err := s.store.Put(ctx, key, chunkHead(gen, n), meta)
	if err != nil {
		t.addStray(gen, n)
	}
	put.f, put.chunkGen, put.chunkN = f, gen, n
	return put, err
}

// summaryHeader is the thread summary stored with t's checkpoint head (see
// wire.HeaderStatus). A thread reloaded and checkpointed with no event applied
// since (lastAt 0) carries no wire.HeaderLastEvent rather than a wrong one.
func summaryHeader(t *hotThread) nats.Header {
	h := nats.Header{
		wire.HeaderSeq:    {strconv.FormatUint(t.th.Seq(), 10)},
		wire.HeaderStatus: {t.th.Status().String()},
	}
	if t.lastAt > 0 {
		h[wire.HeaderLastEvent] = []string{strconv.FormatInt(t.lastAt, 10)}
	}
	return h
}

// chunkSize is the largest record stored in one put: well under the
// configured max message size and the server's max payload (a *nats.Conn
// publisher knows it), either of which bounds what the server accepts.
func (s *shard) chunkSize() int {
	limit := int(s.cfg.MaxMsgSize)
	if c, ok := s.pub.(interface{ MaxPayload() int64 }); ok && c.MaxPayload() > 0 {
		limit = min(limit, int(c.MaxPayload()))
	}
	return max(1024, limit-4096)
}

func (s *shard) purgeChunks(key string, gen uint64, n int) {
	for i := 0; i < n; i++ {
		_ = s.store.Purge(chunkKey(key, gen, i))
	}
}

// getRecord reads a thread's checkpoint record, joining chunks.
func (s *shard) getRecord(ctx context.Context, t *hotThread) ([]byte, error) {
	key := wire.CheckpointKey(t.key.tenant, t.key.token)
	val, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	gen, n, chunked, err := parseChunkHead(val)
	if err != nil || !chunked {
		return val, err
	}
	var rec []byte
	for i := 0; i < n; i++ {
		c, err := s.store.Get(ctx, chunkKey(key, gen, i))
		if errors.Is(err, ErrNoCheckpoint) {
			return nil, fmt.Errorf("%w: chunk %d of %d missing", ErrCheckpoint, i, n)
		}
		if err != nil {
			return nil, err
		}
		rec = append(rec, c...)
	}
	t.chunkGen, t.chunkN = gen, n
	return rec, nil
}

// ack acks, with AckAll semantics, the last pending message below the
// partition's watermark.
func (s *shard) ack(ctx context.Context, ps *partState, force bool) {
	// Acks only move the consumer's ack floor (what a restart replays), so
	// they are sent at most every ackInterval per partition: each one also
	// makes the server persist the consumer's state.
	if !force && s.now.Sub(ps.ackedAt) < ackInterval && len(ps.pending) < s.cfg.MaxAckPending/4 {
		return
	}
	wm := ps.watermark()
	i := 0
	for i < len(ps.pending) && ps.pending[i].seq < wm {
		i++
	}
	if i == 0 {
		// Nothing new to ack, but the last ack may have come within
		// floorInterval of the last floor write and not be stored yet.
		s.storeFloor(ctx, ps, force)
		return
	}
	_ = ps.pending[i-1].msg.Ack() // AckAll: covers every earlier message of the consumer
	ps.ackedAt, ps.acked = s.now, ps.pending[i-1].seq
	s.storeFloor(ctx, ps, force)
	// Drop the acked prefix. When it is at least as long as the rest, the
	// rest moves to the front, so the array is reused instead of outgrown
	// (it holds pointers: every reallocation is GC work); otherwise the
	// slice just advances, so a long backlog is not copied on every ack.
	// Either way the cost is at most the number of messages acked.
	if n := len(ps.pending) - i; n <= i {
		copy(ps.pending, ps.pending[i:])
		clear(ps.pending[n:])
		ps.pending = ps.pending[:n]
	} else {
		clear(ps.pending[:i])
		ps.pending = ps.pending[i:]
	}
	if n := len(ps.pending); cap(ps.pending) > 4096 && n < cap(ps.pending)/8 {
		ps.pending = append(make([]pendingMsg, 0, 2*n), ps.pending...) // shrink after a burst
	}
}

// ackInterval is the least time between two acks of a partition.
const ackInterval = 20 * time.Millisecond

// thread returns the hot thread for k, loading its checkpoint when cold. It
// retries a failing store until ctx ends (then nil): applying without the
// checkpoint would apply events out of order.
func (s *shard) thread(ctx context.Context, ps *partState, k threadKey) *hotThread {
	if t := s.threads[k]; t != nil {
		return t
	}
	if t := s.preloaded[k]; t != nil {
		delete(s.preloaded, k)
		if t.part == ps {
			s.threads[k] = t
			s.m.HotThreads.Inc()
			return t
		}
	}
	t := newHotThread(ps, k)
	var err error
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err = s.load(ctx, t)
		if err == nil {
			break
		}
		s.log.Warn("checkpoint load failed", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
	s.threads[k] = t
	s.m.HotThreads.Inc()
	return t
}

// newHotThread is the thread k of partition ps, not yet loaded (load).
func newHotThread(ps *partState, k threadKey) *hotThread {
	id := threadID(k.token)
	return &hotThread{key: k, id: id, part: ps, compact: compact.New(),
		idJSON: appendJSONString(nil, id), subject: wire.ViewSubject(k.tenant, k.token)}
}

// coldThread is the thread k of partition ps read only to answer a
// snapshot (never kept hot), not yet loaded (load).
func coldThread(ps *partState, k threadKey) *hotThread {
	return &hotThread{key: k, id: threadID(k.token), part: ps}
}

// threadID is the thread id a token encodes (the token itself for one
// that does not decode: the subject parsers validated it).
func threadID(token string) string {
	if id, err := wire.DecodeThread(token); err == nil {
		return id
	}
	return token
}

// preloadParallel bounds the checkpoint reads preload has in flight.
const preloadParallel = 16

// preload reads the checkpoints of the threads a batch's messages touch
// that are not in memory, concurrently, before the batch is handled in
// order. Handled one by one, each such message would stall the shard a
// round trip to the store: when many threads start or come back at once
// (a fleet of agents starting, a partition taken over), a batch of them
// took as many round trips as it had threads, and every frame of the
// shard waited for all of them. A read that fails is left to thread,
// which retries it in order.
func (s *shard) preload(ctx context.Context, ds []delivery) {
	if len(ds) < 2 {
		return // one read gains nothing from going first
	}
	var todo []*hotThread
	for _, d := range ds {
		part, tenant, token, err := wire.ParseStoredSubject(d.msg.Subject())
		ps := s.parts[part]
		if err != nil || ps == nil {
			continue
		}
		k := threadKey{tenant, token}
		if s.threads[k] != nil || s.preloaded[k] != nil {
			continue
		}
		if s.preloaded == nil {
			s.preloaded = make(map[threadKey]*hotThread)
		}
		t := newHotThread(ps, k)
		s.preloaded[k] = t
		todo = append(todo, t)
	}
	if len(todo) < 2 {
		clear(s.preloaded) // one read gains nothing from going first
		return
	}
	errs := s.loadAll(ctx, todo)
	for i, t := range todo {
		if errs[i] != nil {
			delete(s.preloaded, t.key)
			s.forgetCold(t.key) // a failed read may have got as far as the head
		}
	}
}

// dropPreloaded drops the threads preload read that the batch did not take
// (a redelivery is skipped before its thread is looked up): they are not
// hot, so the store forgets their keys too.
func (s *shard) dropPreloaded() {
	for k := range s.preloaded {
		s.forgetCold(k)
	}
	clear(s.preloaded)
}

// loadAll loads ts from their checkpoints, preloadParallel at a time, and
// returns each one's error.
func (s *shard) loadAll(ctx context.Context, ts []*hotThread) []error {
	errs := make([]error, len(ts))
	sem := make(chan struct{}, preloadParallel)
	var wg sync.WaitGroup
	for i, t := range ts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.load(ctx, t)
			<-sem
		}()
	}
	wg.Wait()
	return errs
}

// load fills t from its checkpoint, or as a new thread.
func (s *shard) load(ctx context.Context, t *hotThread) error {
	val, err := s.getRecord(ctx, t)
	if errors.Is(err, ErrNoCheckpoint) {
		t.th = reducer.NewThread(t.id)
		return nil
	}
	if err != nil && !errors.Is(err, ErrCheckpoint) {
		return err
	}
	var rec ckptRecord
	if err == nil {
		rec, err = parseCkpt(val)
	}
	if err == nil {
		t.th, err = loadThreadCheckpoint(rec.thread)
	}
	if err != nil {
		// A checkpoint we cannot read cannot be trusted; starting the thread
		// from nothing would silently drop its history. Surface it loudly
		// and start empty: the alternative, stalling the partition, hurts
		// every other thread (contract 5).
		s.log.Error("unreadable checkpoint; thread restarts empty", "tenant", t.key.tenant, "err", err)
		t.th = reducer.NewThread(t.id)
		return nil
	}
	t.ckptSeq, t.frameSeq = rec.seq, rec.frameSeq
	if t.compact != nil && t.th.ChunkLanesOpen() > 0 {
		// The frames go on from the middle of chunk streams that the
		// compactor has not seen open: it must not fold their closures away.
		t.compact = compact.NewMidStream()
	}
	t.viewSize = t.th.ViewSize()
	t.run.unmarshal(rec.run)
	s.m.Loads.Inc()
	return nil
}

// keyForgetter is a CheckpointStore that keeps state per key (the fenced
// store's revisions) for every key it reads. That state is for the hot
// threads, whose checkpoints the shard writes: evict tells it when a
// thread's key is no longer hot, and forgetCold when a key was read for a
// thread that never became hot (a snapshot of a cold thread, a preload the
// batch did not take). Otherwise it would grow with every thread ever
// read, outside MemoryBudget.
type keyForgetter interface{ forget(key string) }

// forgetCold tells the store to forget k's key unless k is hot: a hot
// thread's key keeps its revision, which fences its next write, and a
// thread that becomes hot later reads its key again (load).
func (s *shard) forgetCold(k threadKey) {
	if s.threads[k] != nil {
		return
	}
	if f, ok := s.store.(keyForgetter); ok {
		f.forget(wire.CheckpointKey(k.tenant, k.token))
	}
}

// touch moves t to the head of the LRU list.
func (s *shard) touch(t *hotThread) {
	if s.lruHead == t {
		return
	}
	s.unlink(t)
	t.next = s.lruHead
	if s.lruHead != nil {
		s.lruHead.prev = t
	}
	s.lruHead = t
	if s.lruTail == nil {
		s.lruTail = t
	}
}

func (s *shard) unlink(t *hotThread) {
	if t.prev != nil {
		t.prev.next = t.next
	} else if s.lruHead == t {
		s.lruHead = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else if s.lruTail == t {
		s.lruTail = t.prev
	}
	t.prev, t.next = nil, nil
}

// evict drops clean threads from the cold end until the shard is within its
// memory budget. Dirty threads stay: their changes exist nowhere else.
func (s *shard) evict() {
	for t := s.lruTail; t != nil && s.mem > s.cfg.MemoryBudget; {
		prev := t.prev
		if t.dirtySeq == 0 && !t.inBatch && t.put == nil {
			s.unlink(t)
			delete(s.threads, t.key)
			if f, ok := s.store.(keyForgetter); ok {
				f.forget(wire.CheckpointKey(t.key.tenant, t.key.token))
			}
			s.mem -= int64(t.mem)
			s.m.Evictions.Inc()
			s.m.HotThreads.Dec()
		}
		t = prev
	}
}

// tenantOf and threadTokenOf pick the tokens of a stored subject for a dead
// letter about a subject that did not parse; "" when absent.
func tenantOf(subj string) string      { return tokenAt(subj, 2) }
func threadTokenOf(subj string) string { return tokenAt(subj, 3) }

func tokenAt(subj string, n int) string {
	for i := 0; i < n; i++ {
		j := bytes.IndexByte([]byte(subj), '.')
		if j < 0 {
			return ""
		}
		subj = subj[j+1:]
	}
	if j := bytes.IndexByte([]byte(subj), '.'); j >= 0 {
		subj = subj[:j]
	}
	return subj
}
