package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// threadView serves GET /v1/threads/{thread}: the current view, fetched
// with a snapshot request (so it is exactly what a joining subscriber
// would get), with its seq in Tc-Seq and as the ETag. With ?window=N the
// view is windowed to the newest N messages (pipeline/frame.go); the ETag
// then names the window too.
func (s *Server) threadView(w http.ResponseWriter, r *http.Request) {
	c, thread, ok := s.authorizeThread(w, r)
	if !ok {
		return
	}
	window, ok := s.windowParam(w, r)
	if !ok {
		return
	}
	tok := pipeline.EncodeThread(thread)
	sn, err := s.hub.snapshot(r.Context(), c.Tenant, tok, window)
	if err != nil {
		s.log.Warn("fanout: view request failed", "tenant", c.Tenant, "err", err)
		s.denyUnavailable(w, err)
		return
	}
	if sn.seq == 0 {
		s.deny(w, http.StatusNotFound, "not_found")
		return
	}
	etag := `"` + strconv.FormatUint(sn.seq, 10) + `"`
	if window > 0 {
		etag = `"` + strconv.FormatUint(sn.seq, 10) + "w" + strconv.Itoa(window) + `"`
	}
	w.Header().Set("ETag", etag)
	w.Header().Set(pipeline.HeaderSeq, strconv.FormatUint(sn.seq, 10))
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b := append([]byte(`{"thread":`), mustJSON(thread)...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, sn.seq, 10)
	b = append(b, `,"status":`...)
	b = append(b, mustJSON(sn.status)...)
	b = append(b, `,"view":`...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+len(sn.view)+2))
	// The view is written as it is held (shared, read-only), not copied
	// into one body: a long thread's is tens of megabytes.
	if _, err := w.Write(b); err == nil {
		if _, err := w.Write(sn.view); err == nil {
			_, _ = w.Write([]byte("}\n"))
		}
	}
}

func mustJSON(v string) []byte {
	b, _ := json.Marshal(v) // a string always marshals
	return b
}

// ThreadInfo is one entry of GET /v1/threads.
//
// In the listing, Seq, Status and LastEvent are the summary the pipeline
// stored with the thread's last checkpoint (pipeline.HeaderStatus): as of
// Updated, so at most a checkpoint interval (or a run's end) behind the
// live view. They are absent for a checkpoint written before the pipeline
// stored a summary, and LastEvent also when no event was applied since the
// thread was last loaded.
type ThreadInfo struct {
	Thread    string     `json:"thread"`
	Updated   time.Time  `json:"updated"`             // time of the last checkpoint
	Seq       uint64     `json:"seq,omitempty"`       // seq of the checkpoint (live variant: of the frame)
	Status    string     `json:"status,omitempty"`    // reducer status ("idle", "running", "finished", "errored", ...)
	LastEvent *time.Time `json:"lastEvent,omitempty"` // time of the last event applied (its timestamp when it had one)
}

// maxListed bounds one listing.
const maxListed = 10000

// threadList serves GET /v1/threads: the tenant's threads from the keys of
// the views KV bucket (one key per checkpointed thread), or — with
// Accept: text/event-stream or ?live=1 — a live SSE stream of every frame's
// thread, seq and status for the tenant (view.<tenant>.*: the wildcard is
// ours, the tenant comes from the token).
func (s *Server) threadList(w http.ResponseWriter, r *http.Request) {
	c, ok := s.authorize(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("live") == "1" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.threadListLive(w, r, c.Tenant, c.AllowsThread)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.hub.cfg.SnapshotTimeout)
	defer cancel()
	out, err := s.listThreads(ctx, c.Tenant, c.AllowsThread)
	if err != nil {
		s.log.Warn("fanout: thread list failed", "tenant", c.Tenant, "err", err)
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Threads []ThreadInfo `json:"threads"`
	}{out})
}

func (s *Server) listThreads(ctx context.Context, tenant string, allow func(string) bool) ([]ThreadInfo, error) {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, err
	}
	// The bucket's stream read directly, not through a KV watcher: the
	// watcher hides message headers, which is where the pipeline puts the
	// thread summary. One ephemeral pull consumer, headers only (no record
	// is sent), the last message of every key of the tenant: what a KV
	// watcher with MetaOnly does, plus the headers. Not an ordered
	// consumer: that one replaces its server-side consumer on every Fetch
	// and deletes the old one from a goroutine of its own, so a listing
	// made two and left one behind for a moment after it returned.
	prefix := "$KV." + s.cfg.ViewsBucket + "."
	stream := "KV_" + s.cfg.ViewsBucket
	// Named here, not by the library, so that a create whose reply timed
	// out after the server made the consumer can still be deleted.
	name := "tclist_" + nuid.Next()
	del := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := js.DeleteConsumer(dctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.log.Warn("fanout: thread list consumer not deleted (the server drops it after 30s idle)", "err", err)
		}
	}
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Name:           name,
		FilterSubjects: []string{prefix + tenant + ".*"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:      jetstream.AckNonePolicy,
		HeadersOnly:    true,
		MemoryStorage:  true,
		Replicas:       1,
		// A backstop: the consumer is deleted below when the listing ends.
		InactiveThreshold: 30 * time.Second,
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return []ThreadInfo{}, nil
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			del() // the server may have made it before the reply was lost
		}
		return nil, err
	}
	// A pull consumer outlives its reader on the server (a KV watcher's
	// push consumer goes with its subscription): delete it, or every
	// listing would leave one behind for InactiveThreshold.
	defer del()
	if h := s.listingHook.Load(); h != nil {
		(*h)()
	}
	// No-wait fetches: the server sends what the consumer has and ends the
	// request at once, where a waiting Fetch for the pending count would
	// sit out its whole deadline whenever a key went away after the
	// consumer counted it. The listing is of what is there when it is made.
	out := []ThreadInfo{}
	left := cons.CachedInfo().NumPending
	for left > 0 && len(out) < maxListed {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := cons.FetchNoWait(int(min(left, 1000)))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			left = meta.NumPending
			if info, ok := threadInfo(m.Headers(), strings.TrimPrefix(m.Subject(), prefix), meta.Timestamp, allow); ok && len(out) < maxListed {
				out = append(out, info)
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			// A no-wait fetch that brought nothing: either the keys counted
			// at creation are gone, or the server was slow to send them
			// (the fetch also ends after a second of silence). Only the
			// consumer's own count tells the two apart.
			info, err := cons.Info(ctx)
			if err != nil {
				return nil, err
			}
			if left = info.NumPending; left == 0 {
				break
			}
			select { // pending but not sent yet: ask again shortly, within the deadline
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	slices.SortFunc(out, func(a, b ThreadInfo) int { return strings.Compare(a.Thread, b.Thread) })
	return out, nil
}

// threadInfo is the listing entry of the views bucket's key (with its
// message's headers and time), or false for a deleted key, a key that is
// not a thread's checkpoint, or a thread the token does not cover.
func threadInfo(h nats.Header, key string, at time.Time, allow func(string) bool) (ThreadInfo, bool) {
	if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return ThreadInfo{}, false
	}
	_, tok, err := pipeline.ParseCheckpointKey(key)
	if err != nil {
		return ThreadInfo{}, false
	}
	id, err := pipeline.DecodeThread(tok)
	if err != nil || !allow(id) {
		return ThreadInfo{}, false
	}
	info := ThreadInfo{Thread: id, Updated: at.UTC(), Status: h.Get(pipeline.HeaderStatus)}
	info.Seq, _ = strconv.ParseUint(h.Get(pipeline.HeaderSeq), 10, 64)
	if ms, err := strconv.ParseInt(h.Get(pipeline.HeaderLastEvent), 10, 64); err == nil && ms > 0 {
		t := time.UnixMilli(ms).UTC()
		info.LastEvent = &t
	}
	return info, true
}

// threadListLive streams {"thread","seq","status","updated"} per frame.
func (s *Server) threadListLive(w http.ResponseWriter, r *http.Request, tenant string, allow func(string) bool) {
	end, ok := s.beginStream(w, tenant)
	if !ok {
		return
	}
	defer end()
	ch := make(chan *nats.Msg, 1024) // bounded: a slow reader loses updates (counted), not memory
	sub, err := s.nc.ChanSubscribe(pipeline.ViewPrefix+"."+tenant+".*", ch)
	if err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	defer func() {
		if n, err := sub.Dropped(); err == nil && n > 0 {
			s.m.TapDropped.Add(float64(n))
		}
		_ = sub.Unsubscribe()
	}()
	if err := s.nc.FlushTimeout(s.hub.cfg.SnapshotTimeout); err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	s.streamMsgs(w, r, ch, false, func(m *nats.Msg, dst []byte) []byte {
		var body struct {
			Thread string `json:"thread"`
			Seq    uint64 `json:"seq"`
			Status string `json:"status"`
		}
		if json.Unmarshal(m.Data, &body) != nil || !allow(body.Thread) {
			return dst
		}
		b, _ := json.Marshal(ThreadInfo{Thread: body.Thread, Seq: body.Seq, Status: body.Status, Updated: time.Now().UTC()})
		return appendData(dst, b)
	})
}

// tap serves GET /v1/tap: the tenant's analytics tap as SSE (default) or
// NDJSON (?format=ndjson or Accept: application/x-ndjson), optionally
// filtered by ?types=T1,T2 (AG-UI type names or RUN_SUMMARY). A token
// limited to some threads sees only those threads' messages.
func (s *Server) tap(w http.ResponseWriter, r *http.Request) {
	c, ok := s.authorize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var subjects []string
	if ts := q.Get("types"); ts != "" {
		for _, t := range strings.Split(ts, ",") {
			if t != pipeline.RunSummaryType && codec.ParseType(t) == codec.TypeUnknown {
				s.deny(w, http.StatusBadRequest, "bad_type")
				return
			}
			subjects = append(subjects, pipeline.TapPrefix+"."+c.Tenant+"."+t+".*")
		}
	} else {
		subjects = []string{pipeline.TapPrefix + "." + c.Tenant + ".*.*"}
	}
	ndjson := q.Get("format") == "ndjson" || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	end, ok := s.beginStream(w, c.Tenant)
	if !ok {
		return
	}
	defer end()
	ch := make(chan *nats.Msg, 4096)
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			if n, err := sub.Dropped(); err == nil && n > 0 {
				s.m.TapDropped.Add(float64(n))
			}
			_ = sub.Unsubscribe()
		}
	}()
	for _, subj := range subjects {
		sub, err := s.nc.ChanSubscribe(subj, ch)
		if err != nil {
			s.deny(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		subs = append(subs, sub)
	}
	// The subscriptions must be registered at the server before the client
	// is told the stream is open.
	if err := s.nc.FlushTimeout(s.hub.cfg.SnapshotTimeout); err != nil {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	all := c.AllThreads()
	// Tap messages larger than one NATS message arrive in parts, which
	// other threads' messages may interleave: joined per subject, and one
	// that lost a part is dropped whole. streamMsgs calls enc from this
	// handler's goroutine alone.
	parts := wire.Assembler{Max: s.hub.cfg.MaxMessageBytes}
	s.streamMsgs(w, r, ch, ndjson, func(part *nats.Msg, dst []byte) []byte {
		m, err := parts.Add(part)
		if err != nil {
			s.m.BadTap.Inc()
		}
		if m == nil {
			return dst
		}
		if !all {
			i := strings.LastIndexByte(m.Subject, '.')
			id, err := pipeline.DecodeThread(m.Subject[i+1:])
			if err != nil || !c.AllowsThread(id) {
				return dst
			}
		}
		if ndjson {
			dst = append(dst, m.Data...)
			return append(dst, '\n')
		}
		return appendData(dst, m.Data)
	})
}

// streamMsgs writes messages from ch, batching whatever is already queued
// into one write and flush, with heartbeats, lifetime and drain like pump.
func (s *Server) streamMsgs(w http.ResponseWriter, r *http.Request, ch <-chan *nats.Msg, ndjson bool, enc func(*nats.Msg, []byte) []byte) {
	h := w.Header()
	if ndjson {
		h.Set("Content-Type", "application/x-ndjson")
	} else {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	var lifetime <-chan time.Time
	if s.cfg.MaxLifetime > 0 {
		t := time.NewTimer(s.cfg.MaxLifetime)
		defer t.Stop()
		lifetime = t.C
	}
	var buf []byte
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		select {
		case m := <-ch:
			buf = enc(m, buf[:0])
		drain:
			for len(buf) < 64<<10 {
				select {
				case m := <-ch:
					buf = enc(m, buf)
				default:
					break drain
				}
			}
			if len(buf) > 0 && !write(buf) {
				return
			}
		case <-hb.C:
			if !ndjson && !write(hbComment) {
				return
			}
		case <-lifetime:
			return
		case <-s.drainCtx.Done():
			return
		case <-r.Context().Done():
			return
		}
	}
}
